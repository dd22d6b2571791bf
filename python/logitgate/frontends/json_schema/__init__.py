"""JSON Schema frontend: a schema (draft 2020-12, with draft-04/06/07 spellings) lowered to the
Grammar IR of the JSON texts valid against it. The package, bottom layer first (docs/design.md):

- data and diagnostics: :mod:`.values`, :mod:`.keywords`, :mod:`.caps`, :mod:`.formats`,
  :mod:`.patterns`, :mod:`.diagnostics`, :mod:`.rules` (the rule table);
- resolution: :mod:`.resolve` (``$id``, ``$anchor``, ``$ref``, the atom registry), :mod:`.fold`
  (combinators over constants folded to ``true`` or ``false``);
- the schema algebra: :mod:`.negation`, :mod:`.expand`, :mod:`.facts`, :mod:`.decide`;
- emitters per JSON type: :mod:`.numbers`, :mod:`.strings`, :mod:`.members`, :mod:`.literals`,
  :mod:`.arrays`, :mod:`.objects` (sub-schemas only through a ``ref(atoms)`` callable);
- the driver: :mod:`.driver` (:func:`schema_to_grammar`).

Soundness rule: every construct is either lowered exactly (possibly accepting fewer
serializations of a valid value, documented in docs/json_schema.md) or raises
:class:`UnsupportedSchemaError` naming the keyword and pointer; ``lenient=True`` turns that
into a recorded entry of the returned ``dropped`` list and lowers the rest.
"""

from .driver import schema_to_grammar, schemas_to_grammar

__all__ = ["schema_to_grammar", "schemas_to_grammar"]
