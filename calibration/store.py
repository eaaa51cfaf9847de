"""Versioned calibration records: one JSON file per calibration, never overwritten.

A record says what was calibrated (``kind``: intrinsics, handeye, sysid), on which robot and
camera (serials), when, how (method), how well (residuals, with the bounds they must stay under),
from which data (hash), how long it stays valid, and the result itself (``payload``). Ids are
``<kind>-<UTC timestamp>-<data hash prefix>``, so a training run can name the exact calibration
it used, and re-running a calibration on new data adds a version instead of replacing one.

``CalibrationStore.require`` is the check a real-arm run is meant to make before it starts: it
returns the ids of valid records (for the run manifest's ``calibration_ids``) or raises
``CalibrationInvalid`` naming what is missing, expired or out of bounds - unless forced. Nothing
calls it yet: ``TrainJob`` writes an empty ``calibration_ids``; ``rlinf-robot doctor`` shows
the store's state (``status_lines``).

Pure stdlib + numpy: importable on a robot PC and by ``rlinf-robot doctor`` without OpenCV.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from pathlib import Path

from rlinf_robot.errors import ConfigError, RlinfRobotError

SCHEMA_VERSION = 1
KINDS = ("intrinsics", "handeye", "sysid")
#: Default validity (days) and residual bounds per kind; a record may carry its own.
DEFAULT_VALID_DAYS = {"intrinsics": 180.0, "handeye": 30.0, "sysid": 90.0}
DEFAULT_BOUNDS = {
    "intrinsics": {"rms_px": 0.5},
    "handeye": {"translation_rms_mm": 2.0, "rotation_rms_deg": 0.2},
    "sysid": {"residual_rms_rad": 0.002},
}
_ID = re.compile(r"^[a-z]+-\d{8}T\d{6}Z-[0-9a-f]{4,16}$")


class CalibrationInvalid(RlinfRobotError):
    """No valid calibration for what was asked (missing, expired or residuals out of bounds)."""


def default_root() -> Path:
    """``$RLINF_CALIBRATION_DIR``, else ``~/.rlinf-robot/calibration``."""
    env = os.environ.get("RLINF_CALIBRATION_DIR")
    return Path(env) if env else Path.home() / ".rlinf-robot" / "calibration"


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class CalibrationRecord:
    kind: str
    robot_serial: str
    camera_serial: str
    method: str
    residuals: dict[str, float]
    data_hash: str
    payload: dict
    created: str = ""  # ISO 8601, UTC
    valid_days: float = 0.0
    bounds: dict[str, float] = field(default_factory=dict)
    id: str = ""
    notes: str = ""
    schema: int = SCHEMA_VERSION

    def __post_init__(self):
        for name in (
            "kind",
            "robot_serial",
            "camera_serial",
            "method",
            "data_hash",
            "created",
            "id",
            "notes",
        ):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"calibration {name} must be a string, got {getattr(self, name)!r}")
        for name in ("residuals", "bounds", "payload"):
            if not isinstance(getattr(self, name), dict):
                raise ConfigError(f"calibration {name} must be a mapping, got {getattr(self, name)!r}")
        if self.kind not in KINDS:
            raise ConfigError(f"calibration kind {self.kind!r} not in {KINDS}")
        if not re.fullmatch(r"[0-9a-f]{4,64}", self.data_hash or ""):
            raise ConfigError(f"calibration data_hash must be hex, got {self.data_hash!r}")
        for k, v in self.residuals.items():
            if not _number(v) or v != v or v < 0:
                raise ConfigError(f"calibration residual {k!r} must be a number >= 0, got {v!r}")
        created = self.created or _now().strftime("%Y-%m-%dT%H:%M:%SZ")
        self.created = created
        try:
            _ = self.created_at
        except ValueError:
            raise ConfigError(
                f"calibration created must be UTC like 2030-01-01T00:00:00Z, got {created!r}"
            ) from None
        if self.valid_days is not None and not _number(self.valid_days):
            raise ConfigError(f"calibration valid_days must be a number of days, got {self.valid_days!r}")
        self.valid_days = float(self.valid_days or DEFAULT_VALID_DAYS[self.kind])
        if not 0 < self.valid_days <= 3650:
            raise ConfigError(f"calibration valid_days must be in (0, 3650], got {self.valid_days}")
        self.bounds = dict(self.bounds or DEFAULT_BOUNDS[self.kind])
        for k, v in self.bounds.items():
            if not _number(v) or not 0 <= v < math.inf:
                raise ConfigError(f"calibration bound {k!r} must be a finite number >= 0, got {v!r}")
        if not self.id:
            stamp = self.created_at.strftime("%Y%m%dT%H%M%SZ")
            self.id = f"{self.kind}-{stamp}-{self.data_hash[:8]}"
        if not _ID.match(self.id) or not self.id.startswith(f"{self.kind}-"):
            raise ConfigError(
                f"calibration id {self.id!r} is malformed (expected {self.kind}-<UTC stamp>-<hash>)"
            )
        if (
            not isinstance(self.schema, int)
            or isinstance(self.schema, bool)
            or not 1 <= self.schema <= SCHEMA_VERSION
        ):
            raise ConfigError(
                f"calibration schema must be an integer in [1, {SCHEMA_VERSION}], got {self.schema!r}"
            )

    @property
    def created_at(self) -> datetime:
        return datetime.strptime(self.created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)

    def age_days(self, now: datetime | None = None) -> float:
        return ((now or _now()) - self.created_at) / timedelta(days=1)

    def problems(self, now: datetime | None = None) -> list[str]:
        """Why this record should not be trusted now (empty list: it is valid)."""
        out = []
        age = self.age_days(now)
        if age > self.valid_days:
            out.append(f"{self.id} is {age:.1f} days old (valid for {self.valid_days:g})")
        for key, bound in self.bounds.items():
            value = self.residuals.get(key)
            if value is None:
                out.append(f"{self.id} has no residual {key!r} to check against {bound:g}")
            elif value > bound:
                out.append(f"{self.id} residual {key} = {value:.4g} exceeds {bound:g}")
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> CalibrationRecord:
        """A record from a file's contents. Anything wrong with it (not UTF-8, not JSON, a key
        missing, unknown or of the wrong type, a bad value) is one ``ConfigError`` naming it."""
        try:
            raw = json.loads(text)
        except UnicodeDecodeError as e:
            raise ConfigError(
                f"calibration record is not UTF-8 text ({e.reason} at byte {e.start})"
            ) from None
        except (ValueError, RecursionError) as e:  # json.JSONDecodeError is a ValueError
            raise ConfigError(f"calibration record is not valid JSON: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError("calibration record must be a JSON object")
        schema = raw.get("schema", SCHEMA_VERSION)
        if _number(schema) and schema > SCHEMA_VERSION:
            raise ConfigError(f"calibration record schema {schema} is newer than {SCHEMA_VERSION}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"calibration record has unknown key(s) {unknown}")
        missing = [
            f.name
            for f in fields(cls)
            if f.default is MISSING and f.default_factory is MISSING and f.name not in raw
        ]
        if missing:
            raise ConfigError(f"calibration record lacks required key(s) {missing}")
        return cls(**raw)


class CalibrationStore:
    """A directory of records: ``<root>/<kind>/<id>.json``."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else default_root()

    def save(self, record: CalibrationRecord) -> Path:
        path = self.root / record.kind / f"{record.id}.json"
        if path.exists():
            raise ConfigError(f"calibration {record.id} already exists; records are never overwritten")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(record.to_json())
        tmp.replace(path)
        return path

    def get(self, record_id: str) -> CalibrationRecord:
        kind = record_id.split("-", 1)[0]
        path = self.root / kind / f"{record_id}.json"
        if kind not in KINDS or not path.exists():
            raise CalibrationInvalid(f"no calibration {record_id!r} in {self.root}")
        return read_record(path)

    def list(self, kind: str | None = None) -> list[CalibrationRecord]:
        """Records, oldest first; unreadable files are skipped (``doctor`` reports them)."""
        out = []
        for k in (kind,) if kind else KINDS:
            for path in sorted((self.root / k).glob("*.json")):
                try:
                    out.append(read_record(path))
                except ConfigError:
                    continue
        return sorted(out, key=lambda r: (r.created, r.id))

    def latest(self, kind: str, robot_serial: str | None = None, camera_serial: str | None = None):
        matches = [
            r
            for r in self.list(kind)
            if (robot_serial is None or r.robot_serial == robot_serial)
            and (camera_serial is None or r.camera_serial == camera_serial)
        ]
        return matches[-1] if matches else None

    def usable(
        self, which: str, kind: str, force: bool = False, robot_serial: str | None = None, hint: str = ""
    ) -> CalibrationRecord | None:
        """Record ``which`` (an id, or ``latest`` of ``kind`` for ``robot_serial``; None when there
        is no such latest one). A stale or out-of-bounds record raises ``CalibrationInvalid`` with
        its problems and ``hint`` (what to do about it) unless ``force``: the one rule the jobs and
        the session apply to the records they use."""
        rec = self.latest(kind, robot_serial) if which == "latest" else self.get(which)
        if rec is None:
            return None
        problems = rec.problems()
        if problems and not force:
            raise CalibrationInvalid(
                f"calibration {rec.id}: {'; '.join(problems)}" + (f" ({hint})" if hint else "")
            )
        return rec

    def require(
        self,
        kinds: tuple[str, ...] = ("handeye",),
        robot_serial: str | None = None,
        force: bool = False,
        now: datetime | None = None,
    ) -> dict[str, str | None]:
        """Ids of the latest valid record per kind; ``CalibrationInvalid`` unless ``force``."""
        ids: dict[str, str | None] = {}
        problems: list[str] = []
        for kind in kinds:
            rec = self.latest(kind, robot_serial)
            if rec is None:
                problems.append(
                    f"no {kind} calibration" + (f" for robot {robot_serial}" if robot_serial else "")
                )
                ids[kind] = None
                continue
            problems += rec.problems(now)
            ids[kind] = rec.id
        if problems and not force:
            raise CalibrationInvalid(
                "calibration check failed: "
                + "; ".join(problems)
                + " (run `rlinf-robot calibrate ...` or pass --force)"
            )
        return ids


def status_lines(store: CalibrationStore, now: datetime | None = None) -> list[tuple[bool, str, str]]:
    """(ok, label, detail) per calibration kind, for ``rlinf-robot doctor``: the latest record's
    id, age and residuals, or why it should not be trusted (missing, expired, out of bounds)."""
    lines = []
    for kind in KINDS:
        rec = store.latest(kind)
        if rec is None:
            lines.append((False, f"calib {kind}", f"none in {store.root} (rlinf-robot calibrate {kind})"))
            continue
        problems = rec.problems(now)
        shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted(rec.residuals.items()))
        detail = f"{rec.id}, {rec.age_days(now):.1f} d old, {shown}"
        lines.append((not problems, f"calib {kind}", detail if not problems else "; ".join(problems)))
    bad = [p for k in KINDS for p in sorted((store.root / k).glob("*.json")) if not _readable(p)]
    if bad:
        lines.append((False, "calib files", f"{len(bad)} unreadable record(s), e.g. {bad[0]}"))
    return lines


def read_record(path: Path) -> CalibrationRecord:
    """The record in ``path``, which must be ``<kind>/<its id>.json``; ``ConfigError`` naming the
    file and what is wrong with it otherwise (unreadable, corrupted, or another record's file)."""
    try:
        rec = CalibrationRecord.from_json(Path(path).read_bytes())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    if path.name != f"{rec.id}.json" or path.parent.name != rec.kind:
        raise ConfigError(f"{path}: holds record {rec.id!r} of kind {rec.kind!r}, not the one its name says")
    return rec


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _readable(path: Path) -> bool:
    try:
        read_record(path)
        return True
    except ConfigError:
        return False
