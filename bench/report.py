"""The printed tables (also pasted into docs/performance.md, "Current results")."""

from __future__ import annotations

from .neo4j_log import describe, describe_jvm
from .stalls import describe as describe_stalls
from .stats import NEO4J_ADDED_TARGET_MS, held_checkpoint


def _ms(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def _side(side: dict | None) -> list[str]:
    if not side:
        return ["n/a"] * 5
    return [f"{side['rps']:,.0f}", _ms(side["p50_ms"]), _ms(side["p99_ms"]),
            _ms(side["p999_ms"]), str(side["errors"])]


def machine_line(result: dict) -> str:
    m = result["machine"]
    return (f"machine: {m['nproc']} cores, {m['cpu_model']}, {m['mem_gib']} GiB; "
            f"Python {m['python']}; load generator: {result['loadgen']}; "
            f"commit {result['git_sha']}{' + local changes' if result.get('git_dirty') else ''}, "
            f"{result['date']}; load average at start {m.get('loadavg_at_start')}")


def jvm_line(warm: dict | None) -> str:
    if not warm or not warm.get("rounds"):
        return ""
    return (f", after a JVM warm-up of {warm['seconds']}s ({warm['rounds']} rounds; Neo4j's JIT "
            f"at {warm['jit_cores_last_round']:.2f} of a core in the last)")


def table(result: dict) -> str:
    s = result["settings"]
    lines = [
        f"stored tokens: {result['stored_tokens']:,} (after the run); "
        f"concurrency {s['concurrency']}, {s['warmup_s']:g}s warm-up + {s['duration_s']:g}s "
        "per workload and side" + jvm_line(result.get("jvm_warmup")),
        machine_line(result),
        "",
        "| workload | service req/s | p50 ms | p99 ms | p99.9 ms | errors "
        "| bare req/s | p50 ms | p99 ms | p99.9 ms | errors | ratio |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, w in result["workloads"].items():
        if not w.get("available", True):
            lines.append(f"| {name} | not available: {w.get('note', '')} |" + " |" * 10)
            continue
        r = "-" if w["ratio"] is None else f"{w['ratio']:.2f}"
        if w["ratio"] is not None and w.get("fixed_rate"):
            r += " (fixed rate)"  # both sides loaded at one rate: 1.00 when both kept up
        elif w["ratio"] is not None and w.get("ratio_basis") == "with_drain":
            r += " (with drain)"  # creates a second over the load and the drain: see the notes
        lines.append("| " + " | ".join([name, *_side(w["service"]), *_side(w["bare"]), r]) + " |")
    lines += cpu_table(result)
    lines += one_rate_table(result)
    lines += floor_lines(result)
    lines += audit_table(result)
    lines += memory_lines(result)
    lines += plans_table(result)
    notes = [f"- {n}: {w['note']}" for n, w in result["workloads"].items()
             if w.get("note") and w.get("available", True)]
    notes += [f"- {n}: {w['items_per_request']} tokens a request, "
              f"{w['service_tokens_per_s']:,.0f} tokens/s through the service"
              for n, w in result["workloads"].items() if w.get("service_tokens_per_s")]
    notes += [f"- {n} ({side}): Neo4j in the background during the window: {text}"
              for n, w in result["workloads"].items() for side in ("service", "bare")
              if (text := describe((w.get(side) or {}).get("neo4j_background")))]
    notes += [f"- {n} ({side}): {text}"
              for n, w in result["workloads"].items() for side in ("service", "bare")
              if (text := process_stalls(side, w.get(side) or {}))]
    notes += outbox_notes(result)
    notes += round_notes(result)
    if result.get("tokenize_vs_create") is not None:
        notes.append(f"- tokenize tokens/s ÷ create tokens/s (same run): "
                     f"{result['tokenize_vs_create']:.2f}")
    return "\n".join(lines + (["", *notes] if notes else []))


def round_notes(result: dict) -> list[str]:
    """Per workload measured in several rounds (BENCH_ROUNDS), each round's added CPU and
    Neo4j's, and which side went first: the spread the figures above average."""
    notes = []
    for name, w in result["workloads"].items():
        rounds = w.get("rounds") or []
        if rounds:
            notes.append(f"- {name}, round by round (first side; added by the service; added in "
                         "Neo4j): " + ", ".join(
                             f"{r['first']}; {_cpu(r.get('added_cpu_ms'))}; "
                             f"{_cpu(r.get('neo4j_added_cpu_ms'))}{_checkpointed(r)}"
                             for r in rounds))
        if w.get("neo4j_added_cpu_ms_outside_checkpoints") is not None:
            notes.append(f"- {name}: a checkpoint ran in {w['rounds_with_checkpoint']} of "
                         f"{len(rounds)} rounds; added in Neo4j over the others: "
                         f"{_cpu(w['neo4j_added_cpu_ms_outside_checkpoints'])}")
    return notes


def _checkpointed(round_: dict) -> str:
    """" (checkpoint: <side>)" for the sides whose window held a checkpoint of Neo4j's."""
    sides = [side for side in ("service", "bare")
             if held_checkpoint((round_.get(side) or {}).get("neo4j_background"))]
    return f" (checkpoint: {', '.join(sides)})" if sides else ""


def outbox_notes(result: dict) -> list[str]:
    """Per workload with a subscribed webhook, how each side's deliveries kept up, and what its
    ratio is of."""
    notes = []
    for name, w in result["workloads"].items():
        sides = w.get("outbox") or {}
        parts = []
        for side in ("service", "bare"):
            o = sides.get(side)
            if not o:
                continue
            receiver = ((w.get(side) or {}).get("cpu_ms") or {}).get("receiver")
            left = o["pending_after_drain"]
            rate = o.get("delivered_per_s")
            statements = o.get("statements_per_delivery")
            tx = (w.get(side) or {}).get("neo4j_tx")
            parts.append(
                f"{side} {'-' if rate is None else f'{rate:,.0f}'}/s for "
                f"{o['created_per_s']:,.0f} creates/s, {o['pending_at_end']} pending at the "
                f"load's end (drained within the window in {o['drain_s']:g}s"
                f"{f', {left} not' if left else ''}), "
                f"lag p50 {_ms(o['lag_p50_ms'])} p99 {_ms(o['lag_p99_ms'])} ms, "
                f"{o['received_bad']} refused by the receiver"
                + ("" if o.get("attempt_p50_ms") is None else
                   f", a POST {o['attempt_p50_ms']:g} ms (p50)")
                + ("" if receiver is None else f", receiver {receiver:.2f} ms CPU a create")
                + ("" if tx is None else f", Neo4j transactions a create {tx:.2f}")
                + ("" if statements is None else
                   f", {statements:.2f} loop statements a delivery ({o['claims']} claims, "
                   f"{o['empty_claims']} empty, {o['records']} records)"))
        if parts:
            notes.append(f"- {name}: deliveries during the load: " + "; ".join(parts))
        if (rate := w.get("fixed_rate")) and w.get("service") and w.get("bare"):
            notes.append(
                f"- {name}: both sides loaded at a fixed {rate:,.0f} "
                f"{'creates' if 'outbox' in w else 'requests'} a second (service "
                f"{w['service']['rps']:,.0f}/s, bare {w['bare']['rps']:,.0f}/s): a side below "
                "it could not keep up, and its req/s is what it answered")
        if w.get("ratio_basis") == "with_drain" and sides.get("service") and sides.get("bare"):
            load = w.get("ratio_load")
            notes.append(
                f"- {name}: its ratio is of creates a second over the load and the drain of "
                f"its deliveries (service {_rate(sides['service'].get('created_per_s_with_drain'))}"
                f", bare {_rate(sides['bare'].get('created_per_s_with_drain'))}); over the load "
                f"alone (the table's req/s) {'-' if load is None else f'{load:.2f}'}")
    return notes


def _rate(v) -> str:
    return "-" if v is None else f"{v:,.0f}/s"


def process_stalls(side: str, r: dict) -> str:
    """The stalls worth naming in one side's window: Neo4j's JVM stopping, the side's own process
    (the service's workers, or the bare client) late or collecting."""
    own = describe_stalls(r.get("stalls"))
    parts = [text for text in (describe_jvm(r.get("neo4j_background")),
                               own and f"{'the service' if side == 'service' else 'the client'}"
                                       f"'s {own}") if text]
    return "; ".join(parts)


def cpu_table(result: dict) -> list[str]:
    """CPU milliseconds per request by process (bench/cpu.py), when the run measured them."""
    rows = []
    for name, w in result["workloads"].items():
        svc = (w.get("service") or {}).get("cpu_ms") or {}
        bare = (w.get("bare") or {}).get("cpu_ms") or {}
        if not svc and not bare:
            continue
        cells = [svc.get("service"), svc.get("neo4j"), svc.get("neo4j_jit"), svc.get("loadgen"),
                 bare.get("client"), bare.get("neo4j"), bare.get("neo4j_jit")]
        sides = [w.get(side) or {} for side in ("service", "bare")]
        added = _added(w)
        rows.append("| " + " | ".join([name, *(_cpu(c) for c in cells), added,
                                       _cpu(w.get("neo4j_added_cpu_ms")), *(" / ".join(
            "-" if side.get(key) is None else f"{side[key]:g}" for side in sides)
            for key in ("audit_batch_mean", "neo4j_tx"))]) + " |")
    if not rows:
        return []
    return ["", "CPU ms per request (user + system, from /proc over the measured window):", "",
            "| workload | service | its Neo4j | of which JIT | load generator "
            "| bare client + driver | bare's Neo4j | of which JIT "
            "| added by the service (target) | added in Neo4j (JIT, index sampling apart) "
            "| audit events per batch, service / bare "
            "| Neo4j transactions per request, service / bare |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|", *rows]


def one_rate_table(result: dict) -> list[str]:
    """Each workload again with both sides at one rate (BENCH_ONE_RATE), and how many
    workloads are within the added-CPU and Neo4j targets there and in the closed loop."""
    rows = []
    for name, w in result["workloads"].items():
        one = w.get("at_one_rate")
        if not one:
            continue
        svc = (one.get("service") or {}).get("cpu_ms") or {}
        bare = (one.get("bare") or {}).get("cpu_ms") or {}
        rounds = ", ".join(f"{_cpu(r.get('added_cpu_ms'))}; {_cpu(r.get('neo4j_added_cpu_ms'))}"
                           f"{_checkpointed(r)}" for r in one.get("rounds") or [])
        rows.append(f"| {name} | {one['rate']:,.0f} | {one['service']['rps']:,.0f} "
                    f"| {one['bare']['rps']:,.0f} | {_cpu(svc.get('service'))} "
                    f"| {_cpu(bare.get('client'))} | {_added(one)} "
                    f"| {_neo4j_added(one)} | {rounds or '-'} |")
    if not rows:
        return []
    behind = [f"{name} ({side} {w['at_one_rate'][side]['rps']:,.0f} of "
              f"{w['at_one_rate']['rate']:,.0f} a second)"
              for name, w in result["workloads"].items() if w.get("at_one_rate")
              for side in ("service", "bare")
              if w["at_one_rate"][side]["rps"] < KEPT_UP * w["at_one_rate"]["rate"]]
    return ["", "Both sides again at one rate, a share of the slower side's closed-loop req/s "
                "(CPU ms per request):", "",
            "| workload | rate | service req/s | bare req/s | service | bare client + driver "
            f"| added by the service (target) | added in Neo4j (≤ {NEO4J_ADDED_TARGET_MS:g}) "
            "| its rounds (added; in Neo4j) |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|", *rows, "", targets_line(result),
            *([f"Fell behind the rate (answered under {KEPT_UP:.0%} of it): "
               + ", ".join(behind) + "."] if behind else [])]


KEPT_UP = 0.97  # of the rate asked: below it, a side did not keep up with it


def targets_line(result: dict) -> str:
    """How many workloads are within the added-CPU and the Neo4j targets, in the closed loop
    and at one rate."""
    def count(entries: list[dict], key: str) -> str:
        known = [e[key] for e in entries if e.get(key) is not None]
        return f"{sum(known)} of {len(known)}"

    workloads = list(result["workloads"].values())
    closed = [w for w in workloads if not w.get("fixed_rate")]
    # A workload measured at a fixed rate (webhook_create's deliveries) is at one rate already.
    at_rate = [w.get("at_one_rate") or w for w in workloads
               if w.get("at_one_rate") or w.get("fixed_rate")]
    return (f"Within target at one rate: added CPU {count(at_rate, 'added_cpu_met')}, "
            f"Neo4j {count(at_rate, 'neo4j_added_cpu_met')}; in the closed loop: added CPU "
            f"{count(closed, 'added_cpu_met')}, Neo4j {count(closed, 'neo4j_added_cpu_met')}.")


def _added(entry: dict) -> str:
    if entry.get("added_cpu_ms") is None:
        return "-"
    return (f"{entry['added_cpu_ms']:.2f} (≤ {entry['added_cpu_target_ms']:.2f}"
            f"{'' if entry['added_cpu_met'] else ': over'})")


def _neo4j_added(entry: dict) -> str:
    if entry.get("neo4j_added_cpu_ms") is None:
        return "-"
    return f"{entry['neo4j_added_cpu_ms']:.2f}{'' if entry['neo4j_added_cpu_met'] else ': over'}"


def floor_lines(result: dict) -> list[str]:
    """The HTTP floor (bench/run.py `Bench.floor`), when the run measured it, and what each
    workload adds above it."""
    floor = result.get("http_floor")
    if not floor:
        return []
    service = floor.get("service") or {}
    if floor.get("ms") is None:
        return ["", f"The HTTP floor ({floor['title']}): not measured "
                    f"({service.get('errors', '?')} requests failed)."]
    # Three places: a floor of a tenth of a millisecond moves in its third.
    rounds = ", ".join("-" if ms is None else f"{ms:.3f}" for ms in floor.get("rounds_ms") or [])
    above = ", ".join(f"{name} {w['added_above_floor_ms']:.2f}"
                      for name, w in result["workloads"].items()
                      if w.get("added_above_floor_ms") is not None)
    return ["", f"The HTTP floor ({floor['title']}): {floor['ms']:.3f} ms of the service's "
                f"CPU a request at {service.get('rps', 0):,.0f} req/s (its rounds {rounds})."
            + (f" Added by the service above it: {above}." if above else "")]


def audit_table(result: dict) -> list[str]:
    """The audit trail on against off, when the run measured it (BENCH_AUDIT_OFF)."""
    rows = []
    for name, a in (result.get("audit_off") or {}).items():
        cost = "-" if a["throughput_cost"] is None else f"{100 * a['throughput_cost']:.1f} %"
        target = "" if a["target"] is None else (
            f" (≤ {100 * a['target']:.0f} %{'' if a['met'] else ': over'})")
        rounds = ", ".join("-" if c is None else f"{100 * c:.1f} %"
                           for c in a.get("rounds_throughput_cost") or [])
        rows.append(f"| {name} | {a['on']['rps']:,.0f} | {a['off']['rps']:,.0f} | {cost}{target} "
                    f"| {rounds or '-'} "
                    f"| {_cpu(a['service_cpu_ms_added'])} | {_cpu(a['neo4j_cpu_ms_added'])} |")
    if not rows:
        return []
    side_by_side = any("rounds_throughput_cost" in a for a in result["audit_off"].values())
    how = ("the service, and a second one beside it with the trail off, in turn, round by round"
           if side_by_side else "the service measured with it, then restarted without it")
    return ["", f"The audit trail, on against off ({how}; CPU ms per request):", "",
            "| workload | on req/s | off req/s | throughput it costs (target) | its rounds "
            "| service CPU added | Neo4j CPU added |",
            "|---|--:|--:|--:|--:|--:|--:|", *rows]


def plans_table(result: dict) -> list[str]:
    """Database hits per request of each workload's statements (BENCH_PLANS=1)."""
    if not result.get("plans"):
        return []
    rows = []
    for workload, statements in result["plans"].items():
        for name, p in statements.items():
            ops = ", ".join(f"{op} {n:g}" for op, n in p["top_operators"].items())
            rows.append(f"| {workload} | {name} | {p['per_request']:g} | {p['db_hits']:g} "
                        f"| {p['rows']:g} | {ops} |")
    return ["", "Database work per request (PROFILE of the bare side's statements):", "",
            "| workload | statement | runs per request | db hits | rows | costliest operators |",
            "|---|---|--:|--:|--:|---|", *rows]


def _cpu(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def memory_lines(result: dict) -> list[str]:
    rest, end = result.get("memory_at_rest"), result.get("memory_at_end")
    if rest is None:
        return []  # a result from before memory was reported
    after = ", ".join(f"{n} {w['service_rss_mib_after']}" for n, w in result["workloads"].items()
                      if w.get("service_rss_mib_after") is not None)
    lines = ["", f"Service resident set (MiB, workers summed): at rest {rest['service_rss_mib']}"
             + (f"; after each workload: {after}" if after else "")]
    if end is not None:
        lines.append(f"Neo4j at the end: resident {end['neo4j_rss_mib']} MiB, heap "
                     f"{end['neo4j_heap_mib'].get('used')} MiB used of "
                     f"{end['neo4j_heap_mib'].get('max')}, page cache {end['neo4j_pagecache']}")
    return lines


def soak_table(result: dict) -> str:
    lines = [machine_line(result), "",
             "| seconds | requests | req/s | p50 ms | p99 ms | errors | service RSS MiB "
             "| Neo4j heap used MiB |",
             "|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for s in result["samples"]:
        lines.append(f"| {s['seconds']} | {s['requests']:,} | {s['rps']:,.0f} | {_ms(s['p50_ms'])} "
                     f"| {_ms(s['p99_ms'])} | {s['errors']} | {s['service_rss_mib']} "
                     f"| {s['neo4j_heap_used_mib']} |")
    v = result["verdict"]
    if v.get("grew") is None:
        lines += ["", f"no verdict: {v['why']}"]
    else:
        lines += ["", f"service resident set, second quarter {v['early_mib']} MiB → last quarter "
                  f"{v['late_mib']} MiB ({v['growth_mib']:+} MiB, allowed {v['allowed_mib']}): "
                  + ("GREW" if v["grew"] else "no growth")]
    return "\n".join(lines)


def scale_table(result: dict) -> str:
    lines = [machine_line(result), "",
             "| stored tokens | get p50 ms | get p99 ms | get req/s | list p50 ms | list p99 ms "
             "| list req/s |",
             "|--:|--:|--:|--:|--:|--:|--:|"]
    for size, row in result["sizes"].items():
        g, li = row["get"], row["list"]
        lines.append(f"| {int(size):,} | {_ms(g['p50_ms'])} | {_ms(g['p99_ms'])} | "
                     f"{g['rps']:,.0f} | {_ms(li['p50_ms'])} | {_ms(li['p99_ms'])} | "
                     f"{li['rps']:,.0f} |")
    lo, hi = result["p50_growth_between"]
    lines.append("")
    lines.append(f"p50({hi:,}) / p50({lo:,}): " + ", ".join(
        f"{name} {growth}" for name, growth in result["p50_growth"].items()))
    searches = [n for n in result["p50_growth"] if n.startswith("search_")]
    if searches:
        lines += ["", "| stored tokens | " + " | ".join(f"{n} p50 ms | {n} req/s"
                                                         for n in searches) + " |",
                  "|--:|" + "--:|--:|" * len(searches)]
        for size, row in result["sizes"].items():
            lines.append(f"| {int(size):,} | " + " | ".join(
                f"{_ms(row[n]['p50_ms'])} | {row[n]['rps']:,.0f}" for n in searches) + " |")
    lines += ["", "| stored tokens | load s (cumulative) | audit events | Neo4j heap used MiB "
              "| Neo4j RSS MiB | service RSS MiB | page-cache hit ratio |",
              "|--:|--:|--:|--:|--:|--:|---|"]
    for size, row in result["sizes"].items():
        mem = row.get("memory")
        if mem is None:
            continue  # a result from before these figures were kept
        hits = ", ".join(f"{n} {row[n]['page_cache']['hit_ratio']}"
                         for n in result["p50_growth"] if "page_cache" in row[n])
        lines.append(f"| {int(size):,} | {row['load_seconds']:,} | {row['audit_events']:,} | "
                     f"{mem['neo4j_heap_mib'].get('used')} | {mem['neo4j_rss_mib']:,} | "
                     f"{mem['service_rss_mib']:,} | {hits} |")
    if disk := result.get("disk_mib"):
        lines += ["", f"On disk at the end (Neo4j stopped): store {disk['store']:,} MiB, "
                  f"transaction logs {disk['transaction_logs']:,} MiB"]
    return "\n".join(lines)
