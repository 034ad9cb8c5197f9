"""The vault the hub owns: cryptography, the vault document, the key file and the audit file.

The rules (names, scopes, bindings, versions, lockout, hints) are pure code in
``agentplaza.domain.vault``; this package does the I/O and the cryptography
around them, so the domain stays free of files, keys and clocks.
"""

from .files import KeyFileExposed
from .service import KEY_FILE, VAULT_DOCUMENT, VaultService

__all__ = ["KeyFileExposed", "KEY_FILE", "VAULT_DOCUMENT", "VaultService"]
