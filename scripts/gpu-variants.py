#!/usr/bin/python3
"""Builds variants of one CUDA source into copies of programs of a CUDA
build, for timing and testing them side by side in one device call
(docs/gpu-machine.md, "Variant builds").

  scripts/gpu-variants.py --source kernels/cuda/h3_step.cu \\
      --program bench/h3_step_bench --program kernels/kernels_cuda_test \\
      --variant now=. --variant old=@7e0c717:kernels/cuda/h3_step.cu,kernels/cuda/h3_step_device.cuh \\
      --variant six=DIR [--build build-pack] [--out out/h3-variants.tar.xz] [--dry-run]

A variant is NAME=SPEC, SPEC one of:
  .                   the source tree as it is
  DIR                 an overlay: files at their repository paths
                      (DIR/kernels/cuda/h3_step_device.cuh) that shadow the
                      tree's, for the source and every header it includes
  @REV:PATH[,PATH]    those files as they are at git revision REV, as an
                      overlay
Each variant's object is compiled with the build's own nvcc command for
the source (build.ninja), the overlay's folder first on the include path,
and linked into each program in place of the source's object (or ahead of
the libraries, when the object comes from one of them), with the
program's own link command; the programs are stripped. The archive holds
one folder, variants/: PROGRAM_NAME for every program and variant, and
MANIFEST.json (the build's commit, the source, the variants and their
files). On the device, run them with the GPU pack's lib/ on
LD_LIBRARY_PATH (the pack is built from the same tree: scripts/gpu-pack.sh).

--dry-run prints the commands instead of running them (the overlays are
still written, in a temporary folder). Exit status: 0; 1 when a command
fails; 2 on bad arguments or a build that lacks the source or a program.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Refused(Exception):
    pass


def ninja_statements(text):
    """[(outputs, rule, explicit inputs, {var: value})] of a build.ninja,
    with $-continued lines joined and escaped spaces kept."""
    lines = []
    for raw in text.splitlines():
        if lines and lines[-1].endswith("$") and not lines[-1].endswith("$$"):
            lines[-1] = lines[-1][:-1] + raw.lstrip()
        else:
            lines.append(raw)
    statements = []
    for line in lines:
        if line.startswith("build "):
            head, _, rest = line[len("build "):].partition(": ")
            words = re.split(r"(?<!\$) ", rest)
            rule, inputs = words[0], []
            for w in words[1:]:
                if w in ("|", "||", "|@"):
                    break
                inputs.append(w.replace("$ ", " "))
            outputs = [o.replace("$ ", " ") for o in re.split(r"(?<!\$) ", head)]
            statements.append((outputs, rule, inputs, {}))
        elif line.startswith("  ") and statements and "=" in line:
            name, _, value = line.strip().partition(" = ")
            statements[-1][3][name] = value
    return statements


def rule_commands(build):
    """{rule: command} of the build's CMakeFiles/rules.ninja."""
    rules, name = {}, None
    with open(os.path.join(build, "CMakeFiles", "rules.ninja")) as f:
        for line in f:
            if line.startswith("rule "):
                name = line.split()[1]
            elif name and line.startswith("  command = "):
                rules[name] = line[len("  command = "):].rstrip("\n")
    return rules


def expand(template, values):
    """The rule's command with $NAME (and ${NAME}) replaced; unknown ones
    empty, as ninja leaves them."""
    return re.sub(r"\$\{?([A-Za-z_]+)\}?", lambda m: values.get(m.group(1), ""), template)


def find_compile(statements, source):
    path = os.path.join(ROOT, source)
    for outputs, rule, inputs, variables in statements:
        if rule.startswith("CUDA_COMPILER__") and inputs == [path]:
            return outputs[0], rule, variables
    raise Refused(f"the build compiles no {source} (a CUDA source of this tree)")


def find_link(statements, program):
    for outputs, rule, inputs, variables in statements:
        if outputs[0] == program and rule.startswith("CXX_EXECUTABLE_LINKER__"):
            return inputs, rule, variables
    raise Refused(f"the build links no program {program}")


def overlay(name, spec, tmp):
    """The include folder that shadows the tree for variant `name`, and the
    repository paths it holds; None for the tree itself."""
    if spec == ".":
        return None, []
    if spec.startswith("@"):
        rev, sep, paths = spec[1:].partition(":")
        if not sep or not rev or not paths:
            raise Refused(f"variant {name}: @REV:PATH[,PATH] wanted, not '{spec}'")
        folder = os.path.join(tmp, "overlays", name)
        files = [p for p in paths.split(",") if p]
        for path in files:
            shown = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"],
                                   capture_output=True)
            if shown.returncode != 0:
                raise Refused(f"variant {name}: no {path} at {rev}: "
                              + shown.stderr.decode().strip())
            os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
            with open(os.path.join(folder, path), "wb") as f:
                f.write(shown.stdout)
        return folder, files
    folder = os.path.abspath(spec)
    if not os.path.isdir(folder):
        raise Refused(f"variant {name}: no folder {spec}")
    files = sorted(os.path.relpath(os.path.join(d, f), folder)
                   for d, _, fs in os.walk(folder) for f in fs)
    return folder, files


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-pack"))
    ap.add_argument("--source", required=True)
    ap.add_argument("--program", action="append", required=True)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "h3-variants.tar.xz"))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)

    build = os.path.abspath(args.build)
    variants = []
    for v in args.variant:
        name, sep, spec = v.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_]+", name) or not spec:
            raise Refused(f"--variant wants NAME=SPEC (NAME of letters, digits, _), not '{v}'")
        if name in (n for n, _ in variants):
            raise Refused(f"variant {name} named twice")
        variants.append((name, spec))
    with open(os.path.join(build, "build.ninja")) as f:
        statements = ninja_statements(f.read())
    object_path, compile_rule, compile_vars = find_compile(statements, args.source)
    links = {p: find_link(statements, p) for p in args.program}
    rules = rule_commands(build)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()

    tmp = tempfile.mkdtemp(prefix="gpu-variants.")
    folder = os.path.join(tmp, "variants")
    os.makedirs(folder)
    commands, manifest = [], {"commit": commit, "source": args.source,
                              "programs": args.program, "variants": {}}
    for name, spec in variants:
        include, files = overlay(name, spec, tmp)
        manifest["variants"][name] = {"spec": spec, "files": files}
        source = os.path.join(include or ROOT, args.source)
        if not os.path.exists(source):
            source = os.path.join(ROOT, args.source)
        obj = os.path.join(tmp, f"{name}.o")
        includes = compile_vars.get("INCLUDES", "")
        commands.append(expand(rules[compile_rule], dict(
            compile_vars, INCLUDES=(f"-I{shlex.quote(include)} " if include else "") + includes,
            DEP_FILE=obj + ".d", out=shlex.quote(obj), **{"in": shlex.quote(source)})))
        for program, (inputs, link_rule, link_vars) in links.items():
            objects = [obj if i == object_path else i for i in inputs]
            if obj not in objects:
                objects.insert(0, obj)
            out = os.path.join(folder, f"{os.path.basename(program)}_{name}")
            # The rule is "$PRE_LINK && <link> && $POST_BUILD": the link alone.
            link = [part for part in rules[link_rule].split(" && ") if "$in" in part][0]
            commands.append(expand(link, dict(
                link_vars, FLAGS=link_vars.get("FLAGS", "") + " -s",
                TARGET_FILE=shlex.quote(out), out=shlex.quote(out),
                **{"in": " ".join(shlex.quote(o) for o in objects)})))
    with open(os.path.join(folder, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for command in commands:
        if args.dry_run:
            print(command)
            continue
        if subprocess.run(["sh", "-c", command], cwd=build).returncode != 0:
            print(f"gpu-variants.py: failed: {command}", file=sys.stderr)
            return 1
    if args.dry_run:
        print(f"# overlays and MANIFEST.json in {tmp}")
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with tarfile.open(args.out, "w:xz") as tar:
        tar.add(folder, arcname="variants")
    shutil.rmtree(tmp)
    size = os.path.getsize(args.out) / 1e6
    print(f"gpu-variants.py: {args.out}: {size:.1f} MB, {len(variants)} variants of "
          f"{args.source} in {len(links)} programs")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Refused as e:
        print(f"gpu-variants.py: {e}", file=sys.stderr)
        sys.exit(2)
