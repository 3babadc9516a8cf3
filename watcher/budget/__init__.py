"""When to poll each target: adaptive intervals, and a call budget shared among targets.

Every detection is a poll, and every poll is a call the user pays for; yet most targets (deposit
addresses, token accounts) are idle almost all the time. This package decides how often to poll
each target so that calls go where things move, and what the rules will cost.

The arithmetic is pure (``backoff``, ``allocation``, ``planning``, ``cost``): time is a
parameter, nothing there reads a clock, stores or sends anything. ``cadences`` keeps each
adaptive target's cadence between polls and ``admission`` applies the plan to each sweep; the
budget itself, as a user writes it, is a setting (``watcher.config.call_budget.Budget``).

**Backoff** (``backoff``), without a budget. A target is polled between two bounds, ``every``
and ``max_every``. Activity brings its interval straight back to ``every``; each quiet poll
doubles it, up to ``max_every``. The cadence (interval, next due time, event-rate estimate)
is a few floats kept in the target's state document, so a restart keeps every backoff.

**Allocation** (``allocation``), under a budget (``rpc.budget``: ``20M/month``). If events on a
target arrive as a Poisson process of rate ``λ_i`` and it is polled every ``1/r_i`` seconds,
an event waits on average half an interval, so the expected detection delay summed over all
events is ``Σ λ_i / (2 r_i)``. Minimising that under a total poll rate ``Σ r_i = B``
(Lagrange: ``λ_i / r_i²`` equal for all ``i``) gives ``r_i ∝ sqrt(λ_i)``: a target ten times
busier gets about three times the polls, not ten, because the delay each extra poll saves
shrinks as polls get closer. The rates are then clamped to ``[1/max_every, 1/every]`` and the
proportionality constant is chosen so that the clamped rates spend exactly ``B``. The
budget is the bill, so it wins over ``max_every``: when even ``max_every`` for every target
costs more than ``B``, all intervals stretch by one factor beyond ``max_every``, and the
allocation says by how much.

**How the two combine.** Without a budget, a target's interval is its backoff interval. With
a budget, the interval is ``1 / allocated rate``, from an allocation over the targets'
estimated event rates (``Cadence.rate``, an exponentially weighted events-per-second, with a
prior for new targets), recomputed every so often (``rescheduled`` applies a new one); the
doubling is not used, the sqrt rule already slows the quiet targets. A poll that finds
activity still sets its target back to ``every`` at once, until the next allocation, which
sees the raised rate estimate. Such bursts spend beyond the allocation for that while, so the
more often the allocation is recomputed, the closer the spending stays to the budget.
"""
