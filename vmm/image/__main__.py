"""python -m vmm.image build [--data-dir D] [--force] | show"""
import argparse
import json
import sys

from .build import ImageError, build_image, cached, console_progress, data_dir, recipe_hash


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vmm.image")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or reuse) the guest image")
    b.add_argument("--data-dir")
    b.add_argument("--force", action="store_true", help="rebuild even if cached (new key)")
    s = sub.add_parser("show", help="print the cached image's manifest")
    s.add_argument("--data-dir")
    a = ap.parse_args(argv)
    if a.cmd == "show":
        img = cached(a.data_dir)
        if img is None:
            print(f"no image for recipe {recipe_hash()[:16]} in {data_dir(a.data_dir)}", file=sys.stderr)
            return 1
        print(json.dumps(img.manifest, indent=2))
        return 0
    try:
        if not a.force and cached(a.data_dir) is not None:
            img = cached(a.data_dir)
            print(f"cached: {img.dir}")
        else:
            img = build_image(a.data_dir, console_progress(), force=a.force)
            print(f"built in {img.manifest['build_seconds']}s: {img.dir}")
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(img.key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
