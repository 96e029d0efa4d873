"""The engine step's own array passes, each a numpy definition with its compiled loop twin beside it: the
emission of a step's outcomes, the clip of verify lengths to the output left, the decoding slots and the
blocks a lazy step's slots would hold under exact accounting.

:func:`specsim.twins.twin` chooses, on first call, the compiled twin (numba) or the numpy definition
(``SPECSIM_NO_NUMBA=1``, numba missing or failing to compile); the two are equal bit for bit
(``tests/test_kernels.py``). The other twins live with their definitions: the latent draws in
:mod:`specsim.engine.draws`, DSpark's scan and the lower convex minorant in :mod:`specsim.policies.dspark`, the
sort of the survival values in :mod:`specsim.policies.sorting`.
"""

from __future__ import annotations

import numpy as np

from specsim.twins import twin

# ------------------------------------------------------------------------ the step's own array passes

def _emit_decode_numpy(decode, verify_len, accept, now_s, last_emit_s, num_generated, decode_steps,
                       drafts_verified, drafts_accepted, output_tokens):
    """Reveal a step's outcomes for the decoding slots ``decode`` (R,): returns ``(accepted, gaps_s,
    num_generated, decode_steps, drafts_verified, drafts_accepted, num_accepted, num_finished)``.

    ``accepted`` (R,) int64: each request's leading run of accepted drafts within its verify length, and its
    sum ``num_accepted``; ``gaps_s`` (R,): ``now_s - last_emit_s[decode]``, seconds (``last_emit_s[decode]``
    is set to ``now_s`` in place). The four (S,) counters come back as new arrays (the inputs, which views
    may hold, are not written), each decoding slot adding accepted + 1 tokens (the target's own token), one
    step, its verify length and its accepted drafts; ``num_finished`` counts the decoding slots that reached
    their ``output_tokens``.
    """
    gamma = accept.shape[1]
    within = accept & (np.arange(gamma)[None, :] < verify_len[:, None])            # (R, gamma)
    accepted = within.cumprod(axis=1).sum(axis=1).astype(np.int64)                  # (R,) leading run
    gaps_s = now_s - last_emit_s[decode]
    last_emit_s[decode] = now_s
    generated, steps = num_generated.copy(), decode_steps.copy()
    verified, acc = drafts_verified.copy(), drafts_accepted.copy()
    generated[decode] += accepted + 1
    steps[decode] += 1
    verified[decode] += verify_len
    acc[decode] += accepted
    num_finished = int((generated[decode] >= output_tokens[decode]).sum())
    return accepted, gaps_s, generated, steps, verified, acc, int(accepted.sum()), num_finished


def _emit_decode_loop(decode, verify_len, accept, now_s, last_emit_s, num_generated, decode_steps,
                      drafts_verified, drafts_accepted, output_tokens):
    R = decode.size
    accepted, gaps_s = np.empty(R, np.int64), np.empty(R)
    generated, steps = num_generated.copy(), decode_steps.copy()
    verified, acc = drafts_verified.copy(), drafts_accepted.copy()
    total = finished = 0
    for i in range(R):
        s, n = decode[i], 0
        while n < verify_len[i] and accept[i, n]:
            n += 1
        accepted[i] = n
        total += n
        gaps_s[i] = now_s - last_emit_s[s]
        last_emit_s[s] = now_s
        generated[s], steps[s] = generated[s] + n + 1, steps[s] + 1
        verified[s], acc[s] = verified[s] + verify_len[i], acc[s] + n
        finished += generated[s] >= output_tokens[s]
    return accepted, gaps_s, generated, steps, verified, acc, total, finished


def _clip_to_output_numpy(verify_len, decode, output_tokens, num_generated):
    """A policy's verify lengths (R,) clipped so that no request verifies past its output: returns
    ``(clipped, total, num_clipped, low, high)``.

    ``clipped`` (R,) int64 is ``minimum(verify_len, output_tokens[decode] - num_generated[decode] - 1)`` (a
    new array), ``total`` its sum, ``num_clipped`` how many were lowered, ``low`` / ``high`` the unclipped
    lengths' min and max (0 when R = 0), for the engine's range check.
    """
    room = output_tokens[decode] - num_generated[decode] - 1                          # (R,) drafts left
    clipped = np.minimum(verify_len, room).astype(np.int64)
    low, high = (int(verify_len.min()), int(verify_len.max())) if verify_len.size else (0, 0)
    return clipped, int(clipped.sum()), int((verify_len > room).sum()), low, high


def _clip_to_output_loop(verify_len, decode, output_tokens, num_generated):
    R = verify_len.size
    clipped = np.empty(R, np.int64)
    num_clipped = total = 0
    low = verify_len[0] if R else 0
    high = low
    for i in range(R):
        v = verify_len[i]
        low, high = min(low, v), max(high, v)
        s = decode[i]
        room = output_tokens[s] - num_generated[s] - 1
        if v > room:
            v = room
            num_clipped += 1
        clipped[i] = v
        total += v
    return clipped, total, num_clipped, low, high


def _decoding_slots_numpy(prefill_left, prompt_tokens, num_generated, output_tokens):
    """``(decode, kv_tokens, most_left)``: the slots with no prefill left, (R,) int64; the KV tokens their step
    reads, ``sum(prompt_tokens + num_generated)`` over them (an int); and the most output tokens any of them has
    left, ``max(output_tokens - num_generated)`` over them (an int, 0 when R = 0: the step's largest useful
    draft length is one less, :meth:`specsim.engine.scheduler.Scheduler._useful_drafts`)."""
    decode = np.flatnonzero(prefill_left == 0).astype(np.int64)
    most_left = int((output_tokens[decode] - num_generated[decode]).max()) if decode.size else 0
    return decode, int((prompt_tokens[decode] + num_generated[decode]).sum()), most_left


def _decoding_slots_loop(prefill_left, prompt_tokens, num_generated, output_tokens):
    n = prefill_left.size
    decode = np.empty(n, np.int64)
    R = kv_tokens = most_left = 0
    for s in range(n):
        if prefill_left[s] == 0:
            left = output_tokens[s] - num_generated[s]
            if R == 0 or left > most_left:
                most_left = left
            decode[R] = s
            R += 1
            kv_tokens += prompt_tokens[s] + num_generated[s]
    return decode[:R].copy(), kv_tokens, most_left


def _pack_prefill_numpy(prefill_left, budget):
    """FCFS prefill chunks within a step's token ``budget`` (> 0): ``(slots, tokens)``, (n,) int64 each, the
    slots with prefill left in slot order, each taking ``min(left, budget - the left of those before it)``, those
    that get nothing left out (:meth:`specsim.engine.scheduler.Scheduler._pack_prefill`)."""
    waiting = np.flatnonzero(prefill_left > 0).astype(np.int64)
    left = prefill_left[waiting]
    take = np.minimum(left, np.maximum(0, budget - np.concatenate([[0], np.cumsum(left)[:-1]]))).astype(np.int64)
    keep = take > 0
    return waiting[keep], take[keep]


def _pack_prefill_loop(prefill_left, budget):
    n = prefill_left.size
    slots, tokens = np.empty(n, np.int64), np.empty(n, np.int64)
    k = before = 0
    for s in range(n):
        left = prefill_left[s]
        if left > 0:
            take = min(left, max(0, budget - before))
            before += left
            if take > 0:
                slots[k], tokens[k] = s, take
                k += 1
    return slots[:k].copy(), tokens[:k].copy()


def _lazy_growth_blocks_numpy(decode, verify_len, prompt_tokens, num_generated, kv_blocks, draft_kv_blocks,
                              block_size, gamma, fraction):
    """KV blocks (an int, may be negative) that exact accounting would add to the decoding slots ``decode`` (R,)
    after a lazy step: each holds ``ceil((prompt + generated + 1 + l) / block_size)`` target blocks instead of
    its stale ``kv_blocks`` (last step's unused lookahead released), and, when ``gamma`` and the drafter's KV
    ``fraction`` are nonzero, at least ``ceil(ceil((prompt + generated + gamma) * fraction) / block_size)``
    drafter blocks (:meth:`specsim.engine.kv_manager.KVManager.exact_blocks_used`)."""
    base = prompt_tokens[decode] + num_generated[decode] + 1 + verify_len
    target = int((-(-base // block_size) - kv_blocks[decode]).sum())
    if not (gamma and fraction):
        return target
    ctx = prompt_tokens[decode] + num_generated[decode] + gamma
    need = -(-np.ceil(ctx * fraction).astype(np.int64) // block_size)
    return target + int(np.maximum(need - draft_kv_blocks[decode], 0).sum())


def _lazy_growth_blocks_loop(decode, verify_len, prompt_tokens, num_generated, kv_blocks, draft_kv_blocks,
                             block_size, gamma, fraction):
    total = 0
    for i in range(decode.size):
        s = decode[i]
        total += -(-(prompt_tokens[s] + num_generated[s] + 1 + verify_len[i]) // block_size) - kv_blocks[s]
        if gamma and fraction:
            need = -(-np.int64(np.ceil((prompt_tokens[s] + num_generated[s] + gamma) * fraction)) // block_size)
            total += max(need - draft_kv_blocks[s], 0)
    return total


emit_decode = twin(_emit_decode_numpy, _emit_decode_loop)
lazy_growth_blocks = twin(_lazy_growth_blocks_numpy, _lazy_growth_blocks_loop)
clip_to_output = twin(_clip_to_output_numpy, _clip_to_output_loop)
pack_prefill = twin(_pack_prefill_numpy, _pack_prefill_loop)
decoding_slots = twin(_decoding_slots_numpy, _decoding_slots_loop)


# ------------------------------------------------------------------------ plain decode stretches

def _plain_step_ends_numpy(now_s, next_s, end_by_s, base_s, kv_read_s_per_token, kv_tokens, num_requests,
                           per_request_s, host_s, attention_s, emission_s):
    """Start and end times (k,) of up to ``attention_s.size`` plain steps from ``now_s``: the first k that start
    before ``next_s`` and end before ``end_by_s`` (:meth:`specsim.engine.step_runner.StepRunner.plain_step_ends`).

    Each of the R = ``num_requests`` decoding requests decodes one token per step, so step j reads
    ``kv_tokens + j R`` KV tokens and lasts ``((((base_s + kv_read_s_per_token * kv) + per_request_s) + host_s)
    + attention_s[j]) + emission_s`` seconds (``per_request_s`` and ``emission_s`` are the step's totals for its R
    requests, ``attention_s[j]`` its prefill chunk's attention, 0.0 without one): the scalar arithmetic of
    :meth:`~specsim.hardware.step_profile.StepTimeProfile.step_time` and
    :meth:`~specsim.engine.step_runner.StepRunner.step_time_s`, operation for operation. Each end is the previous
    end plus the step's time, as the event loop adds them (``numpy.cumsum`` adds in order)."""
    kv = (kv_tokens + num_requests * np.arange(attention_s.size, dtype=np.int64)).astype(np.float64)
    t = ((((base_s + kv_read_s_per_token * kv) + per_request_s) + host_s) + attention_s) + emission_s
    bounds = np.cumsum(np.concatenate([[now_s], t]))
    k = int(np.count_nonzero((bounds[:-1] < next_s) & (bounds[1:] < end_by_s)))
    return bounds[:k].copy(), bounds[1:k + 1].copy()


def _plain_step_ends_loop(now_s, next_s, end_by_s, base_s, kv_read_s_per_token, kv_tokens, num_requests,
                          per_request_s, host_s, attention_s, emission_s):
    n = attention_s.size
    starts, ends = np.empty(n), np.empty(n)
    now, kv, k = now_s, kv_tokens, 0
    while k < n and now < next_s:
        t = ((((base_s + kv_read_s_per_token * np.float64(kv)) + per_request_s) + host_s) + attention_s[k]) + emission_s
        end = now + t
        if not end < end_by_s:
            break
        starts[k], ends[k] = now, end
        now, kv, k = end, kv + num_requests, k + 1
    return starts[:k].copy(), ends[:k].copy()


def _plain_kv_steps_numpy(num_steps, lazy_allowed, owed, num_free, fixed_margin, per_step, used, decode,
                          prompt_tokens, num_generated, kv_blocks, block_size):
    """The KV accounting of up to ``num_steps`` plain steps (each slot of ``decode`` (R,) decodes one token per step;
    :meth:`specsim.engine.kv_manager.KVManager.plain_steps`), step by step as ``begin_step``, ``fit_base_need``,
    ``count_lazy_growth`` and ``exact_blocks_used`` do it: a step is lazy while ``owed + fixed_margin <= num_free``
    (and ``lazy_allowed``), adding ``per_step`` to what is owed; else exact: what is owed resets to 0 and every
    decoding slot's blocks are brought to ``ceil((prompt + generated + 1) / block_size)``, taken from the free
    blocks. Stops before an exact step whose blocks exceed the free ones (the slow path then preempts or evicts).

    Returns four (n,) int64 arrays, n <= ``num_steps`` the plain steps: the blocks in use each step reports (from
    ``used``, the pool's count), what is owed after it, the blocks taken (net) up to it, and the latest exact step
    up to it (-1: none)."""
    j = np.arange(num_steps, dtype=np.int64)
    need = (-(-((prompt_tokens[decode] + num_generated[decode] + 1)[None, :] + j[:, None]) // block_size)).sum(axis=1)
    out = np.zeros((4, num_steps), np.int64)
    held, free, taken, last, n = int(kv_blocks[decode].sum()), num_free, 0, -1, 0
    for step in range(num_steps):
        if lazy_allowed and owed + fixed_margin <= free:
            out[0, step] = used + taken + int(need[step]) - held
            owed += per_step
        else:
            delta = int(need[step]) - held
            if delta > free:
                break
            free, taken, held, owed, last = free - delta, taken + delta, int(need[step]), 0, step
            out[0, step] = used + taken
        out[1:, step] = owed, taken, last
        n += 1
    return out[0, :n].copy(), out[1, :n].copy(), out[2, :n].copy(), out[3, :n].copy()


def _plain_kv_steps_loop(num_steps, lazy_allowed, owed, num_free, fixed_margin, per_step, used, decode,
                         prompt_tokens, num_generated, kv_blocks, block_size):
    # the decoding slots' base need by step: step 0's sum, then a block where a slot's tokens cross a boundary
    rises = np.zeros(num_steps, np.int64)
    need = held = 0
    for i in range(decode.size):
        s = decode[i]
        tokens = prompt_tokens[s] + num_generated[s] + 1
        need, held = need - (-tokens // block_size), held + kv_blocks[s]
        j = (-tokens) % block_size + 1                # ceil((tokens + j) / bs) rises where tokens + j - 1 = 0 mod bs
        while j < num_steps:
            rises[j] += 1
            j += block_size
    out = np.zeros((4, num_steps), np.int64)
    free, taken, last, n = num_free, 0, -1, 0
    for step in range(num_steps):
        need += rises[step]
        if lazy_allowed and owed + fixed_margin <= free:
            out[0, step] = used + taken + need - held
            owed += per_step
        else:
            delta = need - held
            if delta > free:
                break
            free, taken, held, owed, last = free - delta, taken + delta, need, 0, step
            out[0, step] = used + taken
        out[1, step], out[2, step], out[3, step] = owed, taken, last
        n += 1
    return out[0, :n].copy(), out[1, :n].copy(), out[2, :n].copy(), out[3, :n].copy()


def _plain_slots_numpy(prefill_left, output_tokens, num_generated, prompt_tokens):
    """``(decode, first_prefilling, fewest_left, kv_tokens)`` of a replica's slots for its plain stretches
    (:meth:`specsim.engine.scheduler.Scheduler.plain_steps_ahead`): the (R,) int64 slots with no prefill left,
    the first slot still prefilling (-1: none), the fewest output tokens any of ``decode`` has left to emit
    (``output_tokens - num_generated``; 0 when R = 0), and the KV tokens the first step's decodes read,
    ``sum(prompt_tokens + num_generated)`` over ``decode`` (an int)."""
    decode = np.flatnonzero(prefill_left == 0).astype(np.int64)
    prefilling = np.flatnonzero(prefill_left)
    fewest = int((output_tokens[decode] - num_generated[decode]).min()) if decode.size else 0
    kv_tokens = int((prompt_tokens[decode] + num_generated[decode]).sum())
    return decode, int(prefilling[0]) if prefilling.size else -1, fewest, kv_tokens


def _plain_slots_loop(prefill_left, output_tokens, num_generated, prompt_tokens):
    n = prefill_left.size
    decode = np.empty(n, np.int64)
    R, first, fewest, kv_tokens = 0, -1, 0, 0
    for s in range(n):
        if prefill_left[s] == 0:
            left = output_tokens[s] - num_generated[s]
            fewest = left if R == 0 or left < fewest else fewest
            kv_tokens += prompt_tokens[s] + num_generated[s]
            decode[R] = s
            R += 1
        elif first < 0:
            first = s
    return decode[:R].copy(), first, fewest, kv_tokens


def _plain_emit_numpy(end_s, last_emit_s, decode, num_generated, decode_steps):
    """The emissions of k plain steps ending at ``end_s`` (k,) >= 1, each decoding slot of ``decode`` (R,) emitting
    one token per step: returns ``(gaps_s, num_generated, decode_steps)``, the (k, R) inter-token gaps in seconds
    (the first step's from each slot's ``last_emit_s``, the others one step's length) and the two (S,) counters
    as new arrays, k added at ``decode``; ``last_emit_s[decode]`` is set to ``end_s[-1]`` in place
    (:meth:`specsim.engine.step_runner.StepRunner.finish_plain`)."""
    k = end_s.size
    gaps = np.empty((k, decode.size))
    gaps[0] = end_s[0] - last_emit_s[decode]
    gaps[1:] = (end_s[1:] - end_s[:-1])[:, None]
    generated, steps = num_generated.copy(), decode_steps.copy()
    generated[decode] += k
    steps[decode] += k
    last_emit_s[decode] = end_s[-1]
    return gaps, generated, steps


def _plain_emit_loop(end_s, last_emit_s, decode, num_generated, decode_steps):
    k, R = end_s.size, decode.size
    gaps = np.empty((k, R))
    generated, steps = num_generated.copy(), decode_steps.copy()
    for i in range(R):
        s = decode[i]
        gaps[0, i] = end_s[0] - last_emit_s[s]
        generated[s] += k
        steps[s] += k
        last_emit_s[s] = end_s[k - 1]
    for j in range(1, k):
        step_s = end_s[j] - end_s[j - 1]
        for i in range(R):
            gaps[j, i] = step_s
    return gaps, generated, steps


plain_slots = twin(_plain_slots_numpy, _plain_slots_loop)
plain_emit = twin(_plain_emit_numpy, _plain_emit_loop)
plain_step_ends = twin(_plain_step_ends_numpy, _plain_step_ends_loop)
plain_kv_steps = twin(_plain_kv_steps_numpy, _plain_kv_steps_loop)

_PLAIN_LOADED: list[bool] = []


def load_plain_kernels() -> None:
    """Call the plain-stretch kernels once on tiny inputs typed as a run's are, so that numba loads them when a
    replica is built, before the event loop is timed (a stretch may first come late in a run; loading from
    numba's cache takes about 0.2 s each, issue 25). Once per process."""
    if _PLAIN_LOADED:
        return
    _PLAIN_LOADED.append(True)
    plain_step_ends(0.0, 1.0, 1.0, 0.01, 0.0, 10, 1, 0.0, 0.0, np.zeros(2), 0.0)
    one = np.ones(1, np.int64)
    plain_kv_steps(2, True, 0, 10, 2, 2, 1, np.zeros(1, np.int64), one, one, one, 16)
    plain_slots(one, one, one, one)
    plain_emit(np.ones(2), np.zeros(1), np.zeros(1, np.int64), one, one)
