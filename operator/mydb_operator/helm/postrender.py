"""Helm post-renderer: the platform's object patches, applied to what the chart rendered.

Helm 4 runs post-renderers as plugins. The operator writes a tiny plugin whose
command is `python -m mydb_operator.helm.postrender PLATFORM_CONFIG`: manifests in
on stdin, patched manifests out on stdout; any failure exits 1 with the
reason, so Helm applies nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ..desired.platform import PlatformError, load_platform, patch_objects

PLUGIN_NAME = "mydb-object-patches"


def write_plugin(folder: Path) -> Path:
    """Make the Helm plugin folder (set HELM_PLUGINS to `folder`); returns the plugin's directory."""
    plugin = folder / PLUGIN_NAME
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / "plugin.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "name": PLUGIN_NAME,
                "type": "postrenderer/v1",
                "runtime": "subprocess",
                "version": "0.1.0",
                "runtimeConfig": {"platformCommand": [{"command": sys.executable, "args": ["-m", __name__]}]},
            }
        )
    )
    return plugin


def main(argv: list[str]) -> int:
    """argv: PLATFORM_CONFIG [ERROR_FILE]. Helm drops a plugin's stderr, so the reason also goes to ERROR_FILE."""
    if len(argv) not in (1, 2):
        print("usage: python -m mydb_operator.helm.postrender PLATFORM_CONFIG [ERROR_FILE]", file=sys.stderr)
        return 2
    try:
        platform = load_platform(Path(argv[0]))
        documents = [d for d in yaml.safe_load_all(sys.stdin) if d]
        yaml.safe_dump_all(
            patch_objects(platform.object_patches, documents), sys.stdout, sort_keys=False, explicit_start=True
        )
    except (PlatformError, yaml.YAMLError) as error:
        print(f"mydb-operator post-renderer: {error}", file=sys.stderr)
        if len(argv) == 2:
            Path(argv[1]).write_text(str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
