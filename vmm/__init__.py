"""AgentPlaza microVM monitor: probe, QEMU backend, guest image, channel, jail.

Standalone: imports nothing of agentplaza or jhrl.
"""
from .backend import Backend, Machine, MachineBusy, MachineSpec, VMError, Volume
from .channel import Channel, ChannelClosed, Stream, StreamReset
from .probe import Platform, probe
from .qemu import QemuBackend, QemuMachine
from .snapshot import Manifest, SnapshotError
from .templates import Templates

__all__ = ["Backend", "Machine", "MachineBusy", "MachineSpec", "VMError", "Volume", "Channel", "ChannelClosed",
           "Stream", "StreamReset", "Platform", "probe", "QemuBackend", "QemuMachine",
           "Manifest", "SnapshotError", "Templates"]
