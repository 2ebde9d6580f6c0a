"""The ``cube_memories`` quota: a cube holding its tenant's quota of valid memories gets
no new episodes.

Weighed once per run and cube, before the run writes, for the cubes its episodes are
bound for (:class:`~.ports.CubeSizes` reads what the cube holds); each decision is
counted (``memstream_quota_decisions_total{quota="cube_memories"}``). A cube at its
quota has the run's episodes dropped before they are recorded; the run's facts are
still judged and written (they correct and add to what the cube knows, and supersede
what they replace) and the conversation's summary is still made. A cube may so end a
run above its quota by that run's facts, or by the episodes of runs weighed at the
same time. The episode retention (:mod:`.episode_retention`) makes room again once
the oldest episodes are folded into their summaries.

Only the built-in provider's cubes (route ``mysql``) are weighed: MemOS and Mem0 keep
their own counts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from streams.consolidation.model import PlannedCandidate, Run
from streams.consolidation.ports import CubeSizes
from streams.quotas.counts import CountQuota

log = logging.getLogger(__name__)
WEIGHED = ("mysql",)


class CubeQuota:
    def __init__(self, sizes: CubeSizes, quota: CountQuota) -> None:
        self.sizes = sizes
        self.quota = quota

    async def keep(self, run: Run, planned: Sequence[PlannedCandidate]) -> list[PlannedCandidate]:
        """``planned`` without the episodes bound for a cube at its quota."""
        if run.provider not in WEIGHED:
            return list(planned)
        cubes = sorted({(p.cube, p.user_id or run.user_id) for p in planned if p.episode})
        full: set[tuple[str, str]] = set()
        for cube, owner in cubes:
            held = 0 if self.quota.limit(run.tenant_id) <= 0 else await self.sizes.valid(
                run.tenant_id, cube, owner)
            if not self.quota.decide(run.tenant_id, held):
                full.add((cube, owner))
        if not full:
            return list(planned)
        kept = [p for p in planned
                if not (p.episode and (p.cube, p.user_id or run.user_id) in full)]
        log.info("run %s: %d episodes dropped, cubes %s at the cube_memories quota of %r",
                 run.closed_id, len(planned) - len(kept), sorted(full), run.tenant_id)
        return kept
