"""``agentplaza tui``: the terminal screen. ``model`` is its state (pure), ``views`` what it draws
(pure), ``app`` the prompt-toolkit screen that carries the two out against the hub."""
