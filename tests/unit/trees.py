"""A recursive tree schema and documents of it that fill parser configuration stores: each
document visits configurations no earlier one did (tests of max_configurations and of what
follows a matcher onto a fresh store)."""

from __future__ import annotations

import json
import random
from typing import Any


def tree_schema(max_label: int) -> dict[str, Any]:
    """Nodes ``{"label": string of at most max_label, "children": up to 3 nodes}``."""
    return {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "maxLength": max_label},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3},
                },
                "required": ["label", "children"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }


def tree_document(depth: int, rng: random.Random) -> bytes:
    """A path ``depth`` nodes deep, at a random position among up to two leaf siblings per level."""
    node: dict[str, Any] = {"label": "leaf", "children": []}
    for i in range(depth):
        kids: list[dict[str, Any]] = [{"label": "x", "children": []} for _ in range(rng.randrange(3))]
        kids.insert(rng.randrange(len(kids) + 1), node)
        node = {"label": f"node {i}", "children": kids}
    return json.dumps(node, separators=(",", ":")).encode()
