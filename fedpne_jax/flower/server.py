"""The Fed-PNE server as a Flower ``ServerApp``: the ask/tell stepper's state in its main loop.

Each step it asks the optimizer (``fp.Optimizer``) for the step's query, sends client m its row in
one message (:mod:`fedpne_jax.flower.wire`), collects and checks the replies, tells the optimizer,
and saves the state atomically (``Optimizer.save``); at the end it writes ``fedpne run``'s result
JSON with a ``flower`` entry.  Run config keys (:mod:`fedpne_jax.flower.spec`) decide resuming,
timeouts, what a lost client does (``on-client-loss``) and ``crash-after-step`` (for the restart
tests); a refused reply is never averaged.

The behaviour in full: docs/guides/flower.md, sections "Faults, with nothing lost" and "Inside the apps".
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np
from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.run import RunNotRunningException

from fedpne_jax.core import compile_cache
from fedpne_jax.core.files import write_atomic
from fedpne_jax.core.optimizer import Optimizer
from fedpne_jax.flower import spec, wire
from fedpne_jax.flower.supernode import quicker_pulls

app = ServerApp()
LOST = (3, 4, 5)     # Flower's MESSAGE_UNAVAILABLE, REPLY_MESSAGE_UNAVAILABLE, NODE_UNAVAILABLE


class RunStopped(RuntimeError):
    """The run stopped before its end (a lost client, a refused reply); the state is kept."""


def log(text: str) -> None:
    print(f"fedpne: {text}", flush=True)


def write_json_atomic(path: str, data: dict) -> None:
    text = json.dumps(data, indent=1).encode()
    write_atomic(os.fspath(path), lambda fh: fh.write(text))


@app.main()
def main(grid: Grid, context: Context) -> None:
    run_config = dict(context.run_config)
    status = spec.given(run_config, "status")
    try:
        quicker_pulls()      # in the try: a bad FEDPNE_FLOWER_NODE_POLL is reported as any other error
        serve(grid, run_config)
    except BaseException as err:
        if isinstance(err, RunNotRunningException) or (isinstance(err, Exception) and stopped_at_superlink(grid)):
            message = "the run was stopped at the SuperLink (flwr stop, or a timeout); its state is kept"
        else:
            message = str(err) if isinstance(err, (RunStopped, ValueError)) else f"{type(err).__name__}: {err}"
        log(f"error: {message}")
        if status:
            write_json_atomic(status, {"ok": False, "message": message})
        raise
    if status:
        write_json_atomic(status, {"ok": True, "message": "done"})


def stopped_at_superlink(grid: Grid) -> bool:
    """Whether the run was stopped at the SuperLink.  A stop reaches a run as whatever its next request
    meets (a push refused mid-object, its messages returned as errors, RunNotRunningException); a
    request of the stopped run's task is refused, which tells them apart."""
    try:
        grid.get_node_ids()
    except RunNotRunningException:
        return True
    # Not known to be a stop: the SuperLink unreachable, or Flower's own ServerApp process
    # (isolation subprocess) interrupting itself on the refusal, whose status is still to be written.
    except BaseException:   # noqa: BLE001
        return False
    return False


def unavailable(reply: Message) -> bool:
    """Whether Flower answered for the client: its message or node unavailable."""
    return reply.has_error() and reply.error.code in LOST


_SPACES: dict = {}


def space_of(problem: spec.Problem):
    """The problem's space, one object per objective in this process: the optimizer keeps an
    objective's compiled programs under its identity, so that a ServerApp process that serves run
    after run (fedpne_jax.flower.warm --server) compiles each problem's steps once."""
    if problem.objective_args is None:
        return problem.space()
    key = json.dumps(problem.objective_args, sort_keys=True, default=str)
    if key not in _SPACES:
        if len(_SPACES) >= 8:
            _SPACES.pop(next(iter(_SPACES)))
        _SPACES[key] = problem.space()
    return _SPACES[key]


def serve(grid: Grid, run_config: dict) -> dict:
    compile_cache.enable()
    problem = spec.problem(run_config)
    state_path, output = spec.given(run_config, "state"), spec.given(run_config, "output")
    if not (state_path and output):
        default_state, default_output = spec.default_paths(problem)
        state_path, output = state_path or default_state, output or default_output
    settings = spec.server_settings(run_config)
    timeout, node_timeout, poll = settings.client_timeout, settings.node_timeout, settings.poll
    on_loss, crash_after = settings.on_client_loss, settings.crash_after_step
    book_path = state_path + ".json"
    fingerprint = problem.fingerprint()
    space = space_of(problem)

    book: dict[str, Any] = {"fingerprint": fingerprint, "steps": [], "lost": [], "resumed_at": []}  # JSON
    opt = None
    if settings.resume and os.path.exists(state_path):
        try:
            with open(book_path) as fh:
                saved = json.load(fh)
        except (OSError, ValueError):
            saved = None
        if saved is None or saved.get("fingerprint") != fingerprint:
            raise RunStopped(f"state {state_path}: it holds another problem's run (or its bookkeeping file "
                             f"{book_path} is missing); remove it, or give another 'state' path")
        opt = Optimizer.load(state_path, space=None if problem.objective_args is None else space)
        book = saved
        book["resumed_at"].append(opt.step)
        log(f"resumed {state_path} at step {opt.step}")
    if opt is None:
        opt = Optimizer(problem.config, space, seeds=problem.seeds, base_seed=problem.seed, f_star=problem.f_star)
        opt.save(state_path)
        write_json_atomic(book_path, book)
    M = problem.num_clients
    lost = {int(entry["client"]) for entry in book["lost"]}
    log(f"{problem.algorithm} with {M} clients, run {opt.run_id}; state {state_path}")

    nodes = identify(grid, M, opt.run_id, node_timeout, poll) if not opt.done else {}
    started = time.time()
    while not opt.done:
        t0 = time.time()
        q = opt.ask()
        step = q.step
        # (S, M, B) counts and (S, M, B, D) points, S = 1 for one run; client m is sent the slots any
        # seed asks of it, with a seed axis when the run has seeds.
        counts, points = (q.counts, q.points) if problem.seeds else (q.counts[None], q.points[None])
        rows, sent_counts = {}, {}  # client m: its slots, and the counts sent (the shape its means must have)
        messages = {}
        for m in range(M):
            if m in lost:
                continue
            slots = np.nonzero((counts[:, m] > 0).any(axis=0))[0]
            if len(slots) == 0:
                continue            # nothing asked of this client this step: no message
            rows[m] = slots
            asked_points, sent_counts[m] = points[:, m][:, slots], counts[:, m][:, slots]
            if not problem.seeds:
                asked_points, sent_counts[m] = asked_points[0], sent_counts[m][0]
            content = wire.query_content(opt.run_id, step, wire.EVALUATE, m, asked_points, sent_counts[m])
            messages[m] = Message(content, dst_node_id=nodes[m], message_type=wire.QUERY)
        sent = sum(wire.payload_bytes(msg) for msg in messages.values())
        asked = time.time()
        replies, missing = exchange(grid, messages, timeout, poll)
        waited = time.time() - asked
        values = np.full(counts.shape, np.nan)
        received, handler, process = 0, 0.0, 0.0
        for m, reply in replies.items():
            if unavailable(reply):
                missing.append(m)
                continue
            try:
                means = wire.check_reply(reply, opt.run_id, step, m, nodes[m], sent_counts[m].shape)
            except wire.ReplyError as err:
                raise RunStopped(f"{err}; refused (never averaged): the run stops with its state kept at step "
                                 f"{opt.step} ({state_path}), rerun to resume") from None
            assert isinstance(means, np.ndarray)       # an evaluate reply's (a hello's reply is a header)
            values[:, m, rows[m]] = means.reshape(counts.shape[0], -1)
            received += wire.payload_bytes(reply)
            header = reply.content["fedpne"]
            handler = max(handler, float(header.get("handler_seconds", 0.0)))
            process = max(process, float(header.get("process_seconds", 0.0)))
        if missing:
            names = ", ".join(wire.who(m, nodes[m]) for m in sorted(missing))
            if on_loss == "stop":
                raise RunStopped(f"{names} did not answer step {step} within {timeout:g} s; the run stops with "
                                 f"its state kept at step {opt.step} ({state_path}): rerun to resume, or set "
                                 f"on-client-loss to 'continue' (fedpne flower local --on-client-loss continue) "
                                 f"to go on with the others")
            for m in missing:
                lost.add(m)
                book["lost"].append({"client": int(m), "node": int(nodes[m]), "step": int(step)})
            log(f"{names} lost at step {step}; going on with {M - len(lost)} clients")
        if len(lost) == M:
            raise RunStopped(f"every client is lost at step {step}; state kept at step {opt.step} ({state_path})")
        if lost:
            alive = [m for m in range(M) if m not in lost]
            fill = np.mean(values[:, alive], axis=1)
            for m in lost:
                values[:, m] = fill
        # Empty slots are NaN: a lost client's, and a seed's among the slots another seed asked.
        values = np.where(counts > 0, values, np.nan)
        opt.tell(q, values if problem.seeds else values[0])
        opt.save(state_path)
        seconds = time.time() - t0
        book["steps"].append({"step": int(step), "slots": int((counts[:, list(rows)] > 0).sum()),
                              "sent_bytes": int(sent), "received_bytes": int(received),
                              "clients": len(rows) - len(missing), "seconds": round(seconds, 4),
                              "exchange_seconds": round(waited, 4), "client_handler_seconds": round(handler, 4),
                              "client_process_seconds": round(process, 4)})
        write_json_atomic(book_path, book)
        log(f"step {step}: {len(rows)} clients x {max((len(r) for r in rows.values()), default=0)} points, "
            f"{seconds:.2f} s, sent {sent} B, received {received} B")
        if crash_after == step:
            log(f"crash-after-step={crash_after}: ending abruptly")
            sys.stdout.flush()
            os._exit(17)
    result = opt.result()
    data = result.to_dict()
    data["flower"] = wire_summary(book, opt, M, time.time() - started)
    write_json_atomic(output, data)
    log(f"done: {opt.step} steps, final regret {float(np.mean(result.final_regret)):.6g}; wrote {output}")
    return data


def wire_summary(book: dict, opt, M: int, seconds: float) -> dict:
    """The run's wire statistics; ``paper_uploads``: the paper's communication count, the means
    uploaded by all M clients (each one float) summed over the seeds, where the algorithm counts them
    (Fed-PNE)."""
    steps = book["steps"]
    uploads = getattr(opt.outputs(), "uploads", None)
    floats = None if uploads is None else int(np.asarray(uploads).sum()) * M
    return {"steps": len(steps), "sent_bytes": int(sum(s["sent_bytes"] for s in steps)),
            "received_bytes": int(sum(s["received_bytes"] for s in steps)),
            "paper_uploads": floats, "lost_clients": book["lost"], "resumed_at_steps": book["resumed_at"],
            "seconds_per_step": [s["seconds"] for s in steps], "run_seconds": round(seconds, 3),
            "per_step": steps}


def exchange(grid: Grid, messages: dict, timeout: float, poll: float) -> tuple[dict, list]:
    """Send {partition: message}; the replies that came within ``timeout`` and the partitions that
    did not answer, or RunNotRunningException when the run was stopped meanwhile.
    (Grid.send_and_receive sleeps 3 s between pulls; this pulls every ``poll``.)"""
    order = list(messages)
    ids = list(grid.push_messages([messages[m] for m in order]))
    pending = {mid: m for mid, m in zip(ids, order) if mid}
    missing = [m for mid, m in zip(ids, order) if not mid]
    replies = {}
    started = time.time()
    deadline = started + timeout
    while pending:
        for reply in grid.pull_messages(list(pending)):
            m = pending.pop(reply.metadata.reply_to_message_id, None)
            if m is not None:
                replies[m] = reply
        if not pending or time.time() > deadline:
            break
        time.sleep(backoff(poll, started))
    # A run stopped at the SuperLink gets its pending messages back as errors that read as lost clients.
    if (missing or pending or any(unavailable(r) for r in replies.values())) and stopped_at_superlink(grid):
        raise RunNotRunningException
    return replies, missing + sorted(pending.values())


def backoff(poll: float, started: float, longest: float = 0.1) -> float:
    """The wait before pulling again: ``poll`` at first, longer as the replies take longer (every pull
    costs the SuperLink CPU that the clients' replies need on a busy machine)."""
    return min(longest, poll + 0.1 * (time.time() - started))


def identify(grid: Grid, M: int, run: str, node_timeout: float, poll: float) -> dict:
    """{partition: node id} of the M clients: every joined SuperNode says its partition-id.

    The SuperLink lists a SuperNode that left (killed, or restarted under a new id) until its
    heartbeats lapse, and a restarted one only once it has joined: so the nodes are listed again on
    every poll, each new one is greeted, and the greeting ends as soon as every partition has
    answered, not when every listed node has.  Answering is part of joining: node-timeout bounds it
    (a first ClientApp may take long to start)."""
    deadline = time.time() + node_timeout
    greeted: set = set()
    pending: dict = {}
    found: dict = {}
    while len(found) < M:
        new = sorted(set(grid.get_node_ids()) - greeted)
        if new:
            greeted.update(new)
            ids = grid.push_messages([Message(wire.query_content(run, -1, wire.HELLO, -1), dst_node_id=node,
                                              message_type=wire.QUERY) for node in new])
            pending.update({mid: node for mid, node in zip(ids, new) if mid})
        for reply in grid.pull_messages(list(pending)) if pending else ():
            node = pending.pop(reply.metadata.reply_to_message_id, None)
            if node is None or unavailable(reply):
                continue
            header = wire.check_reply(reply, run, -1, None, node, None)
            p, n = int(header["partition"]), int(header["partitions"])
            if n != M:
                raise RunStopped(f"node {node}: its node config says num-partitions={n}, the run has {M} clients")
            if not 0 <= p < M:
                raise RunStopped(f"node {node}: partition-id={p} is outside 0..{M - 1}")
            if p in found:
                raise RunStopped(f"nodes {found[p]} and {node} both have partition-id={p}")
            found[p] = node
        if len(found) == M:
            break
        if time.time() > deadline:
            if len(greeted) < M:
                raise RunStopped(f"{len(greeted)} SuperNode(s) joined within {node_timeout:g} s; the run needs "
                                 f"{M} (one per partition-id 0..{M - 1})")
            absent = [p for p in range(M) if p not in found]
            raise RunStopped(f"no SuperNode answered for partition-id {absent} within {node_timeout:g} s")
        time.sleep(max(poll, 0.05))
    log("clients: " + ", ".join(f"{p} = node {found[p]}" for p in range(M)))
    return found
