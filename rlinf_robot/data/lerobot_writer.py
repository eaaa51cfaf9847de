"""A crash-safe writer of LeRobot-format datasets (``LeRobotDataset`` codebase version v3.0).

Written from the published layout, with pyarrow (and Pillow for PNG frames); LeRobot itself is not
needed to write or to read it::

    <root>/
      meta/info.json                              schema (features, dtypes, shapes), fps, counters,
                                                  path templates; codebase_version "v3.0"
      meta/stats.json                             per-feature min / max / mean / std / count
      meta/tasks.parquet                          task string (the index, "task") -> task_index
      meta/episodes/chunk-000/file-000.parquet    one row per episode: length, tasks, where its
                                                  frames are (data/chunk_index, data/file_index,
                                                  dataset_from_index, dataset_to_index), per-episode
                                                  stats (stats/<feature>/<stat>) and our extras
      data/chunk-000/file-000.parquet             the frames: one row per frame
      data/chunk-000/file-001.parquet             ...

One data file per episode (v3 allows several episodes per file; one per file is what makes each
episode's commit a single ``os.replace``); ``chunks_size`` (1000) files per chunk folder. Camera
frames are ``image`` features: PNG bytes embedded in the frame rows (the ``{"bytes", "path"}``
struct the Hugging Face ``Image`` feature stores), so the dataset has no ``videos/`` folder and
``video_path`` is null.

Crash safety. Frames of the running episode stay in memory until :meth:`LeRobotWriter.save_episode`;
then every file it changes is written beside the dataset (``<root>/.staging/``), fsynced and moved
into place with ``os.replace``, in this order: the episode's data file, its episodes-meta file, the
tasks, the stats, and last ``meta/info.json``, whose ``total_episodes`` is the commit point. A
process killed mid-episode leaves nothing of that episode on disk; one killed inside the commit
(a few milliseconds) can leave files of an episode that ``info.json`` does not count: opening the
dataset again (any :class:`LeRobotWriter` on ``root``, or :func:`repair`) removes them, so
committed episodes are all that remains.
"""

from __future__ import annotations

import io
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk folder (LeRobot's default)
EPISODES_PER_META_FILE = 1000  # rows per meta/episodes file (rewritten whole at each commit)
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
STAGING = ".staging"

#: The columns every LeRobot frame has, filled in by the writer.
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
_NUMERIC = {"float32", "float64", "int32", "int64", "bool"}
_RESERVED_EPISODE_KEYS = {
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
    "meta/episodes/chunk_index",
    "meta/episodes/file_index",
}


class DatasetError(RuntimeError):
    """The dataset on disk cannot be opened or appended to as asked (schema, damage)."""


# ---------------------------------------------------------------------------------------- atomics
def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Atomic:
    """Files written in ``<root>/.staging`` and moved into place (same file system)."""

    def __init__(self, root: Path):
        self.root = root
        self.staging = root / STAGING

    def _tmp(self, name: str) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        return self.staging / f"{uuid.uuid4().hex}-{Path(name).name}"

    def _place(self, tmp: Path, rel: str) -> None:
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)

    def write_bytes(self, rel: str, data: bytes) -> None:
        tmp = self._tmp(rel)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._place(tmp, rel)

    def write_json(self, rel: str, obj: Any) -> None:
        self.write_bytes(rel, (json.dumps(obj, indent=4) + "\n").encode())

    def write_table(self, rel: str, table) -> None:
        import pyarrow.parquet as pq

        tmp = self._tmp(rel)
        pq.write_table(table, tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        self._place(tmp, rel)


# ------------------------------------------------------------------------------------------ stats
def _stats_of(values: np.ndarray) -> dict[str, np.ndarray]:
    """min / max / mean / std / count over axis 0 of ``values`` (frames x dims), as float64."""
    v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    return {
        "min": v.min(0),
        "max": v.max(0),
        "mean": v.mean(0),
        "std": v.std(0),
        "count": np.array([len(v)], dtype=np.int64),
    }


def _merge_stats(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The stats of the union of two sets of frames (exact for min, max, mean and std)."""
    na, nb = float(a["count"][0]), float(b["count"][0])
    n = na + nb
    mean = (na * a["mean"] + nb * b["mean"]) / n
    var = (
        na * (a["std"] ** 2 + (a["mean"] - mean) ** 2) + nb * (b["std"] ** 2 + (b["mean"] - mean) ** 2)
    ) / n
    return {
        "min": np.minimum(a["min"], b["min"]),
        "max": np.maximum(a["max"], b["max"]),
        "mean": mean,
        "std": np.sqrt(np.maximum(var, 0.0)),
        "count": np.array([int(n)], dtype=np.int64),
    }


class _ImageStats:
    """Per-channel stats of an image feature in [0, 1], over a pixel subsample of every frame."""

    def __init__(self):
        self.n = 0
        self.sum = self.sumsq = self.min = self.max = None
        self.pixels = 0

    def add(self, img: np.ndarray) -> None:
        px = np.asarray(img[::4, ::4], dtype=np.float64).reshape(-1, img.shape[-1]) / 255.0
        s, ss, lo, hi = px.sum(0), (px * px).sum(0), px.min(0), px.max(0)
        if self.sum is None:
            self.sum, self.sumsq, self.min, self.max = s, ss, lo, hi
        else:
            self.sum, self.sumsq = self.sum + s, self.sumsq + ss
            self.min, self.max = np.minimum(self.min, lo), np.maximum(self.max, hi)
        self.pixels += len(px)
        self.n += 1

    def result(self) -> dict[str, np.ndarray]:
        mean = self.sum / self.pixels
        std = np.sqrt(np.maximum(self.sumsq / self.pixels - mean * mean, 0.0))
        return {
            "min": self.min,
            "max": self.max,
            "mean": mean,
            "std": std,
            "count": np.array([self.n], dtype=np.int64),
        }


def _stats_to_json(stats: dict[str, dict[str, np.ndarray]], features: dict[str, dict]) -> dict:
    out = {}
    for key, st in stats.items():
        image = features.get(key, {}).get("dtype") == "image"
        out[key] = {
            name: (
                np.asarray(v).reshape(-1, 1, 1).tolist()
                if image and name != "count"
                else np.asarray(v).tolist()
            )
            for name, v in st.items()
        }
    return out


# ------------------------------------------------------------------------------------------ writer
def _check_features(features: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, ft in features.items():
        if name in DEFAULT_FEATURES:
            raise ValueError(f"feature {name!r} is filled in by the writer")
        if "/" in name:
            raise ValueError(f"feature names cannot contain '/': {name!r}")
        dtype, shape = ft["dtype"], [int(s) for s in ft["shape"]]
        if dtype not in _NUMERIC | {"string", "image"}:
            raise ValueError(f"feature {name!r}: dtype {dtype!r} is not supported")
        if dtype == "image" and (len(shape) != 3 or shape[2] not in (1, 3)):
            raise ValueError(f"image feature {name!r} needs shape [height, width, channels], got {shape}")
        if dtype != "image" and len(shape) != 1:
            raise ValueError(f"feature {name!r}: only 1-d shapes are supported, got {shape}")
        names = ft.get("names")
        if dtype == "image":
            names = ["height", "width", "channels"]
        out[name] = {"dtype": dtype, "shape": shape, "names": list(names) if names is not None else None}
    return out


def _arrow_type(ft: dict[str, Any]):
    import pyarrow as pa

    dtype, shape = ft["dtype"], ft["shape"]
    if dtype == "image":
        return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    scalar = {
        "float32": pa.float32(),
        "float64": pa.float64(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "string": pa.string(),
    }[dtype]
    return scalar if shape == [1] else pa.list_(scalar, shape[0])


def _png(img: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    arr = np.ascontiguousarray(img)
    Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _rows_table(rows: list[dict[str, Any]]):
    """Episode rows as one table; a key some rows lack is null there (``from_pylist`` alone would
    take the columns of the first row only)."""
    import pyarrow as pa

    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])


def _tasks_table(tasks: list[str]):
    """``meta/tasks.parquet`` as pandas writes a frame indexed by ``task`` with a ``task_index``
    column (LeRobot reads it with ``pandas.read_parquet`` and looks tasks up by that index)."""
    import pyarrow as pa

    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    schema = pa.schema(
        [("task_index", pa.int64()), ("task", pa.string())],
        metadata={b"pandas": json.dumps(pandas_meta).encode()},
    )
    return pa.table({"task_index": list(range(len(tasks))), "task": list(tasks)}, schema=schema)


class LeRobotWriter:
    """Append episodes to the LeRobot v3.0 dataset at ``root`` (created, or reopened and repaired).

    ``features`` maps each per-frame column to ``{"dtype", "shape", "names"}``: dtypes ``float32``,
    ``float64``, ``int32``, ``int64``, ``bool``, ``string`` with shape ``[n]`` (``[1]`` is a
    scalar column), or ``image`` with shape ``[height, width, channels]`` (uint8 frames, stored as
    PNG). ``timestamp``, ``frame_index``, ``episode_index``, ``index`` and ``task_index`` are
    added by the writer. Reopening a dataset with different features or fps raises
    :class:`DatasetError`.

    Not thread-safe: one writer per dataset, used by one thread.
    """

    def __init__(
        self, root: str | Path, features: dict[str, dict[str, Any]], fps: int, robot_type: str | None = None
    ):
        import pyarrow  # noqa: F401 - fail here, not at the first commit, when it is missing

        if int(fps) != fps or fps <= 0:
            raise ValueError(f"fps must be a positive whole number (LeRobot's info.json), got {fps}")
        self.root = Path(root)
        self.fps = int(fps)
        self.features = _check_features(features)
        self.robot_type = robot_type
        self._atomic = _Atomic(self.root)
        self._frames: dict[str, list[Any]] = {}
        self._image_stats: dict[str, _ImageStats] = {}
        self._task: str | None = None
        if (self.root / INFO_PATH).exists():
            self._open()
        else:
            self._create()

    # ------------------------------------------------------------------ properties
    @property
    def num_episodes(self) -> int:
        return self.info["total_episodes"]

    @property
    def num_frames(self) -> int:
        return self.info["total_frames"]

    @property
    def pending_frames(self) -> int:
        return len(self._frames.get("frame_index", ()))

    # ------------------------------------------------------------------ frames
    def add_frame(self, frame: dict[str, Any], task: str) -> None:
        """Buffer one frame of the running episode (in memory: nothing is written until
        :meth:`save_episode`). ``frame`` has every feature; one task string per episode."""
        missing, extra = set(self.features) - set(frame), set(frame) - set(self.features)
        if missing or extra:
            raise ValueError(
                f"frame keys do not match the features: missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        if self._task is None:
            self._task = str(task)
        elif str(task) != self._task:
            raise ValueError(f"one task per episode: got {task!r} after {self._task!r}")
        row: dict[str, Any] = {}
        images: dict[str, np.ndarray] = {}
        for name, ft in self.features.items():  # check and convert all, then append (no torn frame)
            v = frame[name]
            if ft["dtype"] == "image":
                img = np.asarray(v)
                if img.dtype != np.uint8 or list(img.shape) != ft["shape"]:
                    raise ValueError(
                        f"{name}: expected uint8 {ft['shape']}, got {img.dtype} {list(img.shape)}"
                    )
                images[name] = img
                v = _png(img)
            elif ft["dtype"] == "string":
                v = str(v)
            else:
                arr = np.asarray(v, dtype=np.float64 if ft["dtype"].startswith("float") else None)
                if arr.size != ft["shape"][0]:
                    raise ValueError(f"{name}: expected {ft['shape'][0]} values, got shape {arr.shape}")
                v = arr.reshape(-1).astype(ft["dtype"])
            row[name] = v
        for name, img in images.items():
            self._image_stats.setdefault(name, _ImageStats()).add(img)
        row["frame_index"] = self.pending_frames
        for name, v in row.items():
            self._frames.setdefault(name, []).append(v)

    def discard_episode(self) -> None:
        """Drop the running episode's frames."""
        self._frames, self._image_stats, self._task = {}, {}, None

    def save_episode(self, meta: dict[str, Any] | None = None) -> int:
        """Commit the buffered frames as the next episode and return its ``episode_index``.

        ``meta``: extra columns of this episode's row in ``meta/episodes`` (str, bool, int, float;
        anything else is stored as a JSON string)."""
        import pyarrow as pa

        n = self.pending_frames
        if n == 0:
            raise ValueError("save_episode: the episode has no frames")
        ep = self.info["total_episodes"]
        first = self.info["total_frames"]
        task = self._task or ""
        tasks = list(self.tasks)
        new_task = task not in tasks
        if new_task:
            tasks.append(task)
        task_index = tasks.index(task)

        # the frame table: features, then LeRobot's default columns
        cols: dict[str, Any] = {}
        ep_stats: dict[str, dict[str, np.ndarray]] = {}
        for name, ft in self.features.items():
            values = self._frames[name]
            typ = _arrow_type(ft)
            if ft["dtype"] == "image":
                cols[name] = pa.array([{"bytes": b, "path": None} for b in values], type=typ)
                ep_stats[name] = self._image_stats[name].result()
            elif ft["dtype"] == "string":
                cols[name] = pa.array(values, type=typ)
            else:
                arr = np.stack(values)
                ep_stats[name] = _stats_of(arr)
                if ft["shape"] == [1]:
                    cols[name] = pa.array(arr.reshape(-1), type=typ)
                else:
                    cols[name] = pa.FixedSizeListArray.from_arrays(
                        pa.array(arr.reshape(-1), type=typ.value_type), ft["shape"][0]
                    )
        frame_index = np.arange(n, dtype=np.int64)
        defaults = {
            "timestamp": (frame_index / self.fps).astype(np.float32),
            "frame_index": frame_index,
            "episode_index": np.full(n, ep, dtype=np.int64),
            "index": first + frame_index,
            "task_index": np.full(n, task_index, dtype=np.int64),
        }
        for name, values in defaults.items():
            cols[name] = pa.array(values)
            ep_stats[name] = _stats_of(values)
        table = pa.table(cols)

        chunk, file = divmod(ep, CHUNKS_SIZE)
        meta_chunk, meta_file = divmod(ep // EPISODES_PER_META_FILE, CHUNKS_SIZE)
        row: dict[str, Any] = {
            "episode_index": ep,
            "tasks": [task],
            "length": n,
            "data/chunk_index": chunk,
            "data/file_index": file,
            "dataset_from_index": first,
            "dataset_to_index": first + n,
            "meta/episodes/chunk_index": meta_chunk,
            "meta/episodes/file_index": meta_file,
        }
        for key, value in (meta or {}).items():
            if key in _RESERVED_EPISODE_KEYS or key.startswith("stats/"):
                raise ValueError(f"episode meta key {key!r} is the writer's")
            row[key] = (
                value if isinstance(value, (str, bool, int, float)) or value is None else json.dumps(value)
            )
        for name, st in ep_stats.items():
            for stat, v in st.items():
                row[f"stats/{name}/{stat}"] = np.asarray(v).reshape(-1).tolist()

        stats = dict(self.stats)
        for name, st in ep_stats.items():
            stats[name] = _merge_stats(stats[name], st) if name in stats else st
        info = dict(self.info)
        info.update(
            total_episodes=ep + 1,
            total_frames=first + n,
            total_tasks=len(tasks),
            splits={"train": f"0:{ep + 1}"},
        )

        # commit: data, episodes meta, tasks, stats, and info.json last (the commit point)
        self._atomic.write_table(DATA_PATH.format(chunk_index=chunk, file_index=file), table)
        rows = self._meta_rows.setdefault((meta_chunk, meta_file), [])
        rows.append(row)
        self._atomic.write_table(
            EPISODES_PATH.format(chunk_index=meta_chunk, file_index=meta_file), _rows_table(rows)
        )
        if new_task:
            self._atomic.write_table(TASKS_PATH, _tasks_table(tasks))
        self._atomic.write_json(STATS_PATH, _stats_to_json(stats, self._all_features()))
        self._atomic.write_json(INFO_PATH, info)
        self.info, self.stats, self.tasks = info, stats, tasks
        self.discard_episode()
        try:  # leave no empty staging folder behind (it is only there during a commit)
            os.rmdir(self._atomic.staging)
        except OSError:
            pass
        return ep

    # ------------------------------------------------------------------ open / create
    def _all_features(self) -> dict[str, dict[str, Any]]:
        return {**self.features, **DEFAULT_FEATURES}

    def _create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": 0,
            "total_frames": 0,
            "total_tasks": 0,
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200,
            "fps": self.fps,
            "splits": {},
            "data_path": DATA_PATH,
            "video_path": None,
            "features": self._all_features(),
        }
        self.stats: dict[str, dict[str, np.ndarray]] = {}
        self.tasks: list[str] = []
        self._meta_rows: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self._atomic.write_json(INFO_PATH, self.info)

    def _open(self) -> None:
        info = json.loads((self.root / INFO_PATH).read_text())
        if info.get("codebase_version") != CODEBASE_VERSION:
            raise DatasetError(
                f"{self.root}: codebase_version {info.get('codebase_version')!r}, "
                f"this writer appends to {CODEBASE_VERSION} datasets only"
            )
        theirs = {k: v for k, v in info["features"].items() if k not in DEFAULT_FEATURES}
        if theirs != self.features or int(info["fps"]) != self.fps:
            raise DatasetError(
                f"{self.root} holds a dataset with other features or fps "
                f"(fps {info['fps']} vs {self.fps}; features {sorted(theirs)} vs "
                f"{sorted(self.features)}): record into another directory"
            )
        self.info = info
        self.robot_type = info.get("robot_type")
        repair(self.root)
        self._load_committed()

    def _load_committed(self) -> None:
        rows = _episode_rows(self.root, self.info["total_episodes"])
        self._meta_rows = {}
        self.stats = {}
        for row in rows:
            key = (row["meta/episodes/chunk_index"], row["meta/episodes/file_index"])
            self._meta_rows.setdefault(key, []).append(row)
            st = _row_stats(row)
            for name, s in st.items():
                self.stats[name] = _merge_stats(self.stats[name], s) if name in self.stats else s
        self.tasks = _read_tasks(self.root)[: self.info["total_tasks"]]


# ------------------------------------------------------------------------------------------ repair
def _episode_rows(root: Path, limit: int | None = None) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    rows.sort(key=lambda r: r["episode_index"])
    return [r for r in rows if limit is None or r["episode_index"] < limit]


def _row_stats(row: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {}
    for key, v in row.items():
        m = re.fullmatch(r"stats/(.+)/(min|max|mean|std|count)", key)
        if m and v is not None:
            out.setdefault(m.group(1), {})[m.group(2)] = np.asarray(
                v, dtype=np.int64 if m.group(2) == "count" else np.float64
            )
    return {k: v for k, v in out.items() if len(v) == 5}


def _read_tasks(root: Path) -> list[str]:
    import pyarrow.parquet as pq

    path = root / TASKS_PATH
    if not path.exists():
        return []
    t = pq.read_table(path).to_pydict()
    return [task for _, task in sorted(zip(t["task_index"], t["task"], strict=True))]


def repair(root: str | Path) -> dict[str, int]:
    """Make the dataset at ``root`` hold exactly the episodes its ``meta/info.json`` counts: remove
    the staging folder, data files of uncommitted episodes, their rows in ``meta/episodes``, tasks
    that only they introduced, and rewrite ``meta/stats.json`` from the committed episodes. What a
    writer killed inside a commit leaves behind; a no-op on a clean dataset. Returns counts."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    info = json.loads((root / INFO_PATH).read_text())
    committed = int(info["total_episodes"])
    atomic = _Atomic(root)
    out = {"staging_files": 0, "data_files": 0, "episode_rows": 0, "tasks": 0}
    if (root / STAGING).exists():
        out["staging_files"] = sum(1 for _ in (root / STAGING).iterdir())
        shutil.rmtree(root / STAGING)
    # episodes-meta rows beyond the commit point
    for path in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        table = pq.read_table(path)
        keep = [r for r in table.to_pylist() if r["episode_index"] < committed]
        if len(keep) < table.num_rows:
            out["episode_rows"] += table.num_rows - len(keep)
            rel = str(path.relative_to(root))
            if keep:
                atomic.write_table(rel, pa.Table.from_pylist(keep, schema=table.schema))
            else:
                path.unlink()
    rows = _episode_rows(root, committed)
    if len(rows) != committed or [r["episode_index"] for r in rows] != list(range(committed)):
        raise DatasetError(
            f"{root}: meta/info.json counts {committed} episodes, meta/episodes has "
            f"{len(rows)} of them: the dataset is damaged"
        )
    wanted = {(r["data/chunk_index"], r["data/file_index"]) for r in rows}
    for path in sorted((root / "data").glob("chunk-*/file-*.parquet")):
        m = re.fullmatch(r"chunk-(\d+)/file-(\d+)\.parquet", str(path.relative_to(root / "data")))
        if m and (int(m.group(1)), int(m.group(2))) not in wanted:
            path.unlink()
            out["data_files"] += 1
    tasks = _read_tasks(root)
    if len(tasks) > int(info["total_tasks"]):
        out["tasks"] = len(tasks) - int(info["total_tasks"])
        atomic.write_table(TASKS_PATH, _tasks_table(tasks[: int(info["total_tasks"])]))
    if any(out.values()):
        stats: dict[str, dict[str, np.ndarray]] = {}
        for row in rows:
            for name, s in _row_stats(row).items():
                stats[name] = _merge_stats(stats[name], s) if name in stats else s
        atomic.write_json(STATS_PATH, _stats_to_json(stats, info["features"]))
    if (root / STAGING).exists():
        shutil.rmtree(root / STAGING)
    return out
