"""The agent guest image (kernel, initramfs, ext4 root), content-addressed and cached."""
from .build import Image, ImageError, build_image, cached, data_dir, ensure_image, missing_tools

__all__ = ["Image", "ImageError", "build_image", "cached", "data_dir", "ensure_image", "missing_tools"]
