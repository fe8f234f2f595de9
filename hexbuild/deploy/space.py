"""The space check: before any byte is sent, the bytes to push (package and models) against the
free space where they go."""

from __future__ import annotations

from ..errors import DeployFailed
from ..targets.base import DeviceInfo, Target
from ..ui import human_size
from .models import ModelPlan
from .plan import Plan

RESERVE = 1 << 20  # room for manifests and directory entries beyond the file bytes


def check_space(target: Target, info: DeviceInfo, dest: str, models_dir: str, plan: Plan,
                model_plan: ModelPlan) -> None:
    copied = sum(plan.sizes.get(r, 0) for r in plan.copy)
    need_dest = plan.push_bytes + copied + RESERVE if (plan.push or plan.repair or plan.copy) else 0
    need_models = model_plan.push_bytes + RESERVE if model_plan.push else 0
    if not need_dest and not need_models:
        return
    free_dest = info.free_bytes
    where_dest = info.extra.get("free_at") or dest
    checks = []
    if need_models:
        where_m, free_m = target.free_bytes(models_dir)
        if free_m == free_dest and where_m and free_dest is not None and _same_fs(target, where_dest, where_m):
            checks.append((need_dest + need_models, free_dest, where_dest))
        else:
            checks.append((need_dest, free_dest, where_dest))
            checks.append((need_models, free_m, where_m))
    else:
        checks.append((need_dest, free_dest, where_dest))
    for need, free, where in checks:
        if need and free is not None and need > free:
            raise DeployFailed(
                f"not enough space on {info.serial or target.spec} at {where}: {human_size(need)} needed, "
                f"{human_size(free)} free",
                hint="free space on the device (remove old models or installs) or deploy to another --dest")


def _same_fs(target: Target, a: str, b: str) -> bool:
    res = target.capture(["stat", "-c", "%d", a, b])
    ids = res.out.split()
    return res.rc == 0 and len(ids) == 2 and ids[0] == ids[1]
