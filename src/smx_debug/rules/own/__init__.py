"""smx-debug's own rules (family ``smx``): one module per rule, each calling
:func:`smx_debug.rules.registry.define` once. :mod:`smx_debug.rules.registry` imports every module here by name;
nothing else lists them. Debugger's built-ins are not here: they are the pinned catalog."""
