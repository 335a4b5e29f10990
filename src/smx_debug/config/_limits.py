"""Reading a plan file within bounds: its size, and YAML aliases that could expand without end.

A plan is a few KB. YAML anchors are shared, so ``yaml.safe_load`` returns a small graph quickly, but every walk
over the result (validation, ``model_dump``, JSON) expands it as a tree: 1 KB of nested aliases is 10**9 nodes
and ``smx-debug plan validate`` never ends (issue 20). The loader counts aliases while it composes and the nodes
the document expands to before it constructs anything, and refuses past :data:`MAX_ALIASES` or
:data:`MAX_NODES`; a file over :data:`MAX_PLAN_BYTES` is refused before it is parsed. Each refusal is a
:class:`~smx_debug.errors.ConfigError` naming the file.
"""

from __future__ import annotations

from typing import Any

import yaml

from smx_debug.errors import ConfigError

MAX_PLAN_BYTES = 1024 * 1024  # the largest example plan is 2 KB
MAX_ALIASES = 100
MAX_NODES = 100_000  # scalars, lists and mappings once every alias is expanded


def check_size(text: str, source: str) -> None:
    """Refuse a plan file over :data:`MAX_PLAN_BYTES`."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_PLAN_BYTES:
        raise ConfigError(f"{source}: {size / 2**20:.1f} MB, over the {MAX_PLAN_BYTES // 2**20} MB a plan may take",
                          field="(file)", value=source)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts the aliases it composes."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source, self.aliases = source, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise ConfigError(f"{self.source}: more than {MAX_ALIASES} YAML aliases (*name); a plan needs few",
                                  field="(file)", value=self.source)
        return super().compose_node(parent, index)


def _expanded(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes ``node`` becomes once its aliases are expanded (shared nodes counted once per use)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_expanded(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_expanded(k, sizes) + _expanded(v, sizes) for k, v in node.value)
    sizes[id(node)] = total
    return total


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document safely and within bounds.

    Raises:
        ConfigError: the file is too big, has too many aliases, expands past :data:`MAX_NODES` or nests too deep.
        yaml.YAMLError: the text is not YAML (the caller says where).
    """
    check_size(text, source)
    loader = _BoundedLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        nodes = _expanded(node, {})
        if nodes > MAX_NODES:
            raise ConfigError(f"{source}: its YAML aliases expand to {nodes:,} values, over the {MAX_NODES:,} a plan "
                              "may have", field="(file)", value=source)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to be a plan", field="(file)", value=source) from None
    finally:
        loader.dispose()
