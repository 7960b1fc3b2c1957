"""Scenario export and import: a self-describing JSON document (``kind``, schema
version, the payload and the catalog entries it was saved with), upgraded from
older schema versions on import."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from planner.errors import ScenarioError
from planner.spec.scenario import SCHEMA_VERSION, Scenario, scenario_from_dict
from planner.store.common import Ref, guarded, utc_now
from planner.store.frozen import frozen_from_json
from planner.store.limits import check_description, check_name, check_slug, check_tags
from planner.store.models import ScenarioRow
from planner.store.repository import StoredScenario, get_scenario, insert_scenario, scenario_values

__all__ = ["EXPORT_KIND", "export_document", "export_scenario", "import_scenario", "parse_export"]

EXPORT_KIND = "ridgeline.scenario"


@guarded
def export_scenario(*, engine: Engine, ref: Ref) -> dict[str, Any]:
    """A JSON-ready document that :func:`import_scenario` reads back."""
    return export_document(get_scenario(engine=engine, ref=ref))


def export_document(s: StoredScenario) -> dict[str, Any]:
    """The export document of a scenario already loaded (no second read)."""
    return {
        "kind": EXPORT_KIND, "schema_version": SCHEMA_VERSION, "slug": s.slug, "name": s.name,
        "description": s.description, "tags": list(s.tags), "version": s.version,
        "exported_at": utc_now().isoformat(), "scenario": s.payload,
        "frozen_catalog": s.frozen_catalog.model_dump(mode="json") if s.frozen_catalog else None,
    }


def _upgrade_v0(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 0: a bare scenario object (a file as ``plan`` reads it, written
    before export documents existed) becomes a version-1 document."""
    return {"kind": EXPORT_KIND, "schema_version": 1, "name": doc.get("name") or "untitled",
            "description": "", "tags": [], "scenario": doc, "frozen_catalog": None}


class _ExportDoc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    kind: str
    schema_version: int
    slug: str | None = None
    name: str
    description: str = ""
    tags: list[str] = []
    scenario: dict[str, Any]
    frozen_catalog: dict[str, Any] | None = None


def parse_export(document: Any) -> tuple[Scenario, dict[str, Any]]:
    """Validate (and upgrade) an export document without touching a database.
    Returns the scenario and the save arguments; raises ScenarioError."""
    if not isinstance(document, dict):
        raise ScenarioError("import: expected a JSON object")
    doc = dict(document)
    if "kind" not in doc:
        doc = _upgrade_v0(doc)
    if doc.get("kind") != EXPORT_KIND:
        raise ScenarioError(f"import: kind {doc.get('kind')!r} is not a Ridgeline scenario export ({EXPORT_KIND!r})")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ScenarioError(f"import: schema_version must be an integer, got {version!r}")
    if version != SCHEMA_VERSION:
        raise ScenarioError(
            f"import: schema_version {version} is not supported (this planner reads {SCHEMA_VERSION}, "
            "or a bare scenario object)")
    try:
        parsed = _ExportDoc.model_validate(doc)
    except Exception as exc:
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else {"loc": (), "msg": str(exc)}
        loc = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"import: {loc}: {first['msg']}") from None
    try:
        scenario = scenario_from_dict(parsed.scenario)
        frozen = frozen_from_json(parsed.frozen_catalog)
    except ScenarioError as exc:
        raise ScenarioError(f"import: {exc}") from None
    check_tags(parsed.tags)
    check_name(parsed.name)
    check_description(parsed.description)
    if parsed.slug is not None:
        check_slug(parsed.slug)
    return scenario, {"name": parsed.name, "description": parsed.description, "tags": parsed.tags,
                      "slug": parsed.slug, "frozen": frozen}


@guarded
def import_scenario(*, engine: Engine, document: Any, slug: str | None = None) -> StoredScenario:
    """Validate an export document and save it as a new scenario.  Nothing is
    written unless the whole document is valid.  The slug is ``slug``, else the
    document's when free, else one made from the name."""
    scenario, args = parse_export(document)
    values = scenario_values(scenario=scenario, name=args["name"], description=args["description"], tags=args["tags"],
                     frozen=args["frozen"])
    chosen = slug
    if chosen is None and args["slug"]:
        with Session(engine) as session:
            if session.scalars(select(ScenarioRow.id).where(ScenarioRow.slug == args["slug"])).first() is None:
                chosen = args["slug"]
    return insert_scenario(engine, values=values, slug=chosen, note="import")
