"""AgentPlaza microVM monitor: probe, QEMU backend, guest image, channel, jail."""
