"""import-linter contract types of this repository (``lint-imports``, the ``lint`` nox session).

``public_surface``: code outside singa-core imports only SINGA's public modules. A module is
private when any part of its dotted name starts with an underscore (``singa._dtype``,
``singa.ops._nn_ops``); dunder names (``__main__``) are not private. import-linter's own
``forbidden`` contract cannot say "any module whose name starts with an underscore" (its
wildcards replace whole name parts only), hence this contract type.
"""

from __future__ import annotations

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def _is_private(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split("."))


class PublicSurfaceContract(Contract):
    """Modules under ``source_modules`` import no private module of ``core``.

    Options: ``source_modules`` (packages whose imports are checked) and ``core`` (the package
    whose private modules are off limits, e.g. ``singa``).
    """

    type_name = "public_surface"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    core = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        core = str(self.core)
        violations = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            name = source.name
            if name not in graph.modules:
                continue
            for module in sorted({name, *graph.find_descendants(name)}):
                for imported in sorted(graph.find_modules_directly_imported_by(module)):
                    if imported.split(".")[0] != core or not _is_private(imported):
                        continue
                    for detail in graph.get_import_details(importer=module, imported=imported):
                        violations.append((module, imported, detail["line_number"],
                                           detail["line_contents"]))
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, imported, line, contents in check.metadata["violations"]:
            output.print_error(f"{module} imports private {imported} (l.{line}: {contents})")
            output.new_line()
        output.print("Import from singa.backend (backend authors) or the public user modules "
                     "instead; if a needed name is missing there, add it to singa.backend.")
