"""Per-user adapters on disk: one checkpoint folder per trained session, under ``PAL_HOME``.

Layout: ``PAL_HOME/plum/<dataset hash>/<user>/<build id>/<session index>_<sample id>/`` holding the
peft files (``adapter_config.json``, ``adapter_model.safetensors``) and ``train.json`` — the
:class:`TrainRecord` (hyper-parameters, loss per step, time, size). A checkpoint is written to a
temporary folder and renamed, so a folder that exists is complete: a session whose checkpoint
exists is never trained again, and answering "as of" a session uses the newest checkpoint before it.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

RECORD = "train.json"
WEIGHTS = "adapter_model.safetensors"


class TrainRecord(BaseModel):
    """What training one session did; shown in the app and by ``bench/plum_figures.py``."""

    sample_id: str
    session_index: int
    position: int
    pairs: int
    steps: int
    losses: list[float] = Field(default_factory=list)
    loss_before: float | None = None  # weighted loss of this session's pairs before training on them
    seconds: float = 0.0
    hyper: dict[str, Any] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=dict)  # per token class
    truncated: int = 0
    trainable_params: int = 0
    adapter_bytes: int = 0
    version: str = ""
    base_model: str = ""
    device: str = "cpu"
    started_from: str | None = None  # sample id of the previous checkpoint
    created_at: float = 0.0


class Checkpoint(BaseModel):
    folder: Path
    record: TrainRecord

    @property
    def adapter_name(self) -> str:
        """A process-wide unique name for this checkpoint's weights in the shared model."""
        return "plum_" + hashlib.sha1(str(self.folder.resolve()).encode()).hexdigest()[:12] + "_" + self.record.version


class AdapterStore:
    """The checkpoints of one (dataset, user, build)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def folder(self, position: int, sample_id: str) -> Path:
        return self.root / f"{position:03d}_{sample_id}"

    def checkpoints(self) -> list[Checkpoint]:
        """Every complete checkpoint, in session order."""
        out = []
        for f in sorted(self.root.glob("[0-9][0-9][0-9]_*")):
            if (f / RECORD).is_file() and (f / WEIGHTS).is_file():
                out.append(Checkpoint(folder=f, record=TrainRecord.model_validate_json((f / RECORD).read_text())))
        return out

    def get(self, sample_id: str) -> Checkpoint | None:
        return next((c for c in self.checkpoints() if c.record.sample_id == sample_id), None)

    def latest_before(self, session_index: int | None) -> Checkpoint | None:
        """The newest checkpoint of a session before ``session_index`` (None: the newest of all)."""
        found = [c for c in self.checkpoints() if session_index is None or c.record.session_index < session_index]
        return found[-1] if found else None

    def save(self, model: Any, adapter_name: str, record: TrainRecord) -> Checkpoint:
        """Write the adapter's weights, config and record; atomic per folder."""
        from peft.utils import get_peft_model_state_dict
        from safetensors.torch import save_file

        final = self.folder(record.position, record.sample_id)
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        state = {k: v.detach().cpu().contiguous() for k, v in
                 get_peft_model_state_dict(model, adapter_name=adapter_name).items()}
        save_file(state, str(tmp / WEIGHTS))
        model.peft_config[adapter_name].save_pretrained(str(tmp))
        digest = hashlib.sha1((tmp / WEIGHTS).read_bytes()).hexdigest()[:10]
        record = record.model_copy(update={"version": digest, "adapter_bytes": (tmp / WEIGHTS).stat().st_size,
                                           "trainable_params": sum(v.numel() for v in state.values())})
        (tmp / RECORD).write_text(record.model_dump_json(indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        return Checkpoint(folder=final, record=record)

    def loss_curve(self) -> list[dict[str, Any]]:
        """Rows {step, loss, session} over every checkpoint, steps numbered across sessions."""
        rows, step = [], 0
        for c in self.checkpoints():
            for loss in c.record.losses:
                step += 1
                rows.append({"step": step, "loss": loss, "session": c.record.sample_id})
        return rows

    def manifest(self) -> dict[str, Any]:
        return {"root": str(self.root), "sessions": [c.record.sample_id for c in self.checkpoints()]}

