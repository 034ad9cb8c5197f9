"""AgentPlaza microVM monitor: probe, QEMU backend, guest image, channel, jail.

Standalone: imports nothing of agentplaza or jhrl.
"""
from .backend import Backend, Machine, MachineSpec, VMError, Volume
from .channel import Channel, ChannelClosed, Stream, StreamReset
from .probe import Platform, probe
from .qemu import QemuBackend, QemuMachine

__all__ = ["Backend", "Machine", "MachineSpec", "VMError", "Volume", "Channel", "ChannelClosed",
           "Stream", "StreamReset", "Platform", "probe", "QemuBackend", "QemuMachine"]
