#!/usr/bin/python3
"""Follows a run's options through the code, as issue 42 measures it.

Starting at one function (default: run_render), it walks, in the order the calls are written, every function
the options are passed on to: a function "holds the options" when one of its parameters is of a carrier type
(RenderOptions, RenderContext, BatchOptions, the requests; --carriers). Each function is visited once; the
walk is depth first, so after a callee's calls the next stop is the caller's next callee. It prints the
stops (file, function) and counts:
  stops        functions visited,
  files        distinct files among them,
  moves up     a stop in a higher stage than the stop before it (src/ stages, lowest first: core io hub
               checkpoint model maps draw, then app/'s engine, then the front ends app/commands, app/cli),
  returns      a stop in a file that is not the previous stop's but was visited earlier.
--follow parts (the default) follows a call given the options or any part of them (a path, a number, a
list taken out of them); --follow first the same, but a function given only a part is a stop and is not
followed further (where the options' parts are handed, not what is done with them); --follow whole only a call
given an options object itself (an argument of a carrier type), i.e. where the options as such go.

Needs Debian's python3-clang-14 and a compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON;
no build needed):
  cmake -S . -B /tmp/cc -DCMAKE_EXPORT_COMPILE_COMMANDS=ON && tools/trace_options.py /tmp/cc
"""
import argparse
import json
import os
import shlex
import sys

import clang.cindex as ci

CACHE_FORMAT = 2  # bump when Graph's records change
CARRIERS = ["RenderOptions", "RenderContext", "BatchOptions", "CliArgs", "EvalOptions", "FigureArgs",
            "StatsArgs", "CheckedRequest", "GivenSettings", "ModelSpec", "ViewRequest", "OutputSpec",
            "BatchSpec"]
STAGES = ["core", "io", "hub", "checkpoint", "text", "model", "maps", "draw", "engine", "app/engine", "app/commands",
          "app/cli", "app"]


def stage_rank(rel):
    """The stage of a path under src/: its rank, lowest first (app/engine counts as the engine stage)."""
    for name in sorted(STAGES, key=len, reverse=True):
        if rel.startswith(name + "/"):
            return {"app/engine": STAGES.index("engine"), "app": STAGES.index("app/commands")}.get(
                name, STAGES.index(name))
    return -1


def compile_args(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = True
            continue
        if a.endswith((".cpp", ".cc")):
            continue
        out.append(a)
    return out + ["-I/usr/lib/llvm-14/lib/clang/14.0.6/include"]


def newest_stamp(path, src):
    """A source's cache key: its own and its folder's headers' modification times (the inline functions it
    defines are mostly in those)."""
    folder = os.path.dirname(path)
    return max([os.path.getmtime(path)] + [os.path.getmtime(os.path.join(folder, n)) for n in os.listdir(folder)
                                           if n.endswith(".hpp")])


def is_carrier(type_spelling, carriers):
    return any(c in type_spelling for c in carriers)


class Graph:
    """Every function defined under src/: its file, name, line, parameters (name usr, carrier or not) and its
    calls in the order written, each with the declarations its arguments refer to."""

    def __init__(self, src, carriers):
        self.src = os.path.realpath(src)
        self.carriers = carriers
        self.defs = {}

    def rel(self, cursor):
        f = cursor.location.file
        if f is None:
            return None
        p = os.path.realpath(f.name)
        return os.path.relpath(p, self.src) if p.startswith(self.src + os.sep) else None

    def carrier_type(self, t):
        return is_carrier(t.spelling, self.carriers) or is_carrier(t.get_canonical().spelling, self.carriers)

    def calls(self, fn):
        """[(callee usr, [set of (usr, is carrier) per argument])] in the order written; a member call's object
        counts as an argument (a method of an options object gets the options)."""
        out = []

        def refs(node):
            s = set()
            stack = [node]
            while stack:
                n = stack.pop()
                if n.kind in (ci.CursorKind.DECL_REF_EXPR, ci.CursorKind.MEMBER_REF_EXPR) and n.referenced is not None:
                    r = n.referenced
                    s.add((r.get_usr(), bool(self.carrier_type(r.type))))
                stack.extend(n.get_children())
            return s

        def walk(node):
            for ch in node.get_children():
                if ch.kind == ci.CursorKind.CALL_EXPR and ch.referenced is not None:
                    args = [sorted(refs(a)) for a in ch.get_arguments()]
                    whole = [bool(self.carrier_type(a.type)) for a in ch.get_arguments()]
                    kids = list(ch.get_children())
                    if kids and kids[0].kind == ci.CursorKind.MEMBER_REF_EXPR:
                        args.append(sorted(refs(kids[0])))
                        obj = list(kids[0].get_children())
                        whole.append(bool(obj) and bool(self.carrier_type(obj[0].type)))
                    out.append((ch.referenced.get_usr(), args, whole))
                walk(ch)
        walk(fn)
        return out

    def add_tu(self, tu):
        kinds = (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.CXX_METHOD, ci.CursorKind.CONSTRUCTOR,
                 ci.CursorKind.FUNCTION_TEMPLATE)

        def visit(node):
            for ch in node.get_children():
                if ch.kind in kinds and ch.is_definition():
                    rel = self.rel(ch)
                    usr = ch.get_usr()
                    if rel and usr not in self.defs:
                        params = [(a.get_usr(), self.carrier_type(a.type)) for a in ch.get_arguments()]
                        self.defs[usr] = (rel, ch.spelling, ch.location.line, params, self.calls(ch))
                elif ch.kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.CLASS_DECL, ci.CursorKind.STRUCT_DECL,
                                 ci.CursorKind.UNEXPOSED_DECL):
                    if ch.location.file is None or self.rel(ch) is not None:
                        visit(ch)
        visit(tu.cursor)


def trace(graph, root, follow):
    """Depth first from `root`, calls in the order written: a call is followed when one of its arguments
    refers to the options - a declaration of a carrier type, or a parameter that received the options."""
    starts = [u for u, d in graph.defs.items() if d[1] == root]
    if not starts:
        sys.exit("no definition of %s under %s" % (root, graph.src))
    seen, stops = set(), []

    def go(usr, tainted):
        seen.add(usr)
        rel, name, line, params, calls = graph.defs[usr]
        stops.append((rel, name, line))
        held = set(tainted) | {p for p, carrier in params if carrier}
        params = [tuple(p) for p in params]
        for callee, args, whole in calls:
            d = graph.defs.get(callee)
            if d is None or callee in seen:
                continue
            hot = [i for i, refs in enumerate(args) if any(carrier or u in held for u, carrier in refs)
                   and (follow != "whole" or whole[i])]
            if hot and follow == "first" and not any(whole[i] for i in hot):
                seen.add(callee)  # a part handed to a function: a stop, not followed further
                stops.append(tuple(d[:3]))
            elif hot:
                go(callee, {d[3][i][0] for i in hot if i < len(d[3])})
    go(starts[0], set())
    return stops


def count(stops):
    ups = returns = 0
    left = set()
    for i in range(1, len(stops)):
        prev, cur = stops[i - 1][0], stops[i][0]
        if stage_rank(cur) > stage_rank(prev):
            ups += 1
        if cur != prev:
            left.add(prev)
            if cur in left:
                returns += 1
    return {"stops": len(stops), "files": len({s[0] for s in stops}), "moves_up": ups, "returns": returns}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="a build folder with compile_commands.json")
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    ap.add_argument("--root", default="run_render")
    ap.add_argument("--carriers", default=",".join(CARRIERS))
    ap.add_argument("--follow", choices=["parts", "first", "whole"], default="parts",
                    help="parts: a call that is given the options or any part of them (a path, a number);"
                         " first: the same, but a function given only a part is not followed further;"
                         " whole: a call that is given an options object itself (a carrier type)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON only")
    ap.add_argument("--libclang", default="/usr/lib/x86_64-linux-gnu/libclang-14.so.1")
    a = ap.parse_args()
    ci.Config.set_library_file(a.libclang)
    index = ci.Index.create()
    graph = Graph(a.src, [c for c in a.carriers.split(",") if c])
    cache_path = os.path.join(a.build, "trace_options.cache.json")
    cache = json.load(open(cache_path)) if os.path.exists(cache_path) else {}
    for e in json.load(open(os.path.join(a.build, "compile_commands.json"))):
        f = os.path.realpath(e["file"])
        if not f.startswith(graph.src + os.sep) or not os.path.exists(f):  # outside src/, or moved since configured
            continue
        stamp = [CACHE_FORMAT, newest_stamp(f, graph.src)]
        if cache.get(f, {}).get("stamp") != stamp:
            one = Graph(a.src, graph.carriers)
            one.add_tu(index.parse(f, args=compile_args(e)))
            cache[f] = {"stamp": stamp, "defs": one.defs}
        for usr, d in cache[f]["defs"].items():
            graph.defs.setdefault(usr, d)
    json.dump(cache, open(cache_path, "w"))
    stops = trace(graph, a.root, a.follow)
    counts = count(stops)
    if a.json:
        print(json.dumps(counts))
        return
    for rel, name, line in stops:
        print("  %-40s %s:%d" % (name, rel, line))
    print("%(stops)d stops in %(files)d files, %(moves_up)d moves back up a stage, "
          "%(returns)d returns to a file already left" % counts)


if __name__ == "__main__":
    main()
