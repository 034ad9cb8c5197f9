"""JHRL: the plaza's law language. Standalone: it imports nothing of agentplaza or vmm."""
