"""`eqdsl extract`, `import`, `export`: one file in, one file out."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import cast

from eqdsl import status
from eqdsl.cli.common import (
    AT_LEAST_ZERO,
    Work,
    constant_flag,
    param_flag,
    published,
    shape_flag,
    stderr,
    weights_from,
    writing,
)
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.registry import EXTRACTORS, ExtractConfig, extractor_names, option_classes
from eqdsl.fields import add_flags, flag_values
from eqdsl.output import FileScratch


def cmd_extract(args: argparse.Namespace) -> Work:
    return writing(args, "out", "--out", lambda scratch: _extract(args, scratch))


def _extract(args: argparse.Namespace, scratch: FileScratch | None) -> int:
    from eqdsl.extract.egraph import read_problem
    from eqdsl.extract.registry import make_extractor, read_extract
    from eqdsl.report import extraction_json

    problem = read_problem(Path(args.egraph))
    given = {k: v for section in [ExtractConfig, *option_classes()] for k, v in flag_values(args, section).items()}
    cfg = read_extract({**given, "method": args.extractor}, "command line")
    status.show(stderr)
    with status.stage(f"extract:{args.extractor}"):
        e = make_extractor(args.extractor, cfg, "--extractor").extract(problem)
    bound = "n/a" if e.bound is None else f"{e.bound:g}"
    gap = "n/a" if e.gap is None else f"{100 * e.gap:.2f} %"
    print(f"{args.egraph}: {problem.num_classes} classes, {len(problem.nodes)} nodes, "
          f"{len(problem.roots)} root(s)")
    print(f"extractor {e.method}: cost {e.cost:g}, status {e.status.value}, bound {bound}, "
          f"gap {gap}, {e.seconds:.3f} s" + (f" ({e.note})" if e.note else ""))
    if scratch is not None:
        written = scratch.write_text(json.dumps(extraction_json(e, problem), indent=2) + "\n")
        print(f"choices written to {published(written, args.out)}")
    return 0


def cmd_import(args: argparse.Namespace) -> Work:
    if args.system == "onnx":
        return writing(args, "output", "--output", lambda scratch: _import_onnx(args, scratch))
    if args.output is None:
        raise EqdslError.one("import tensat: expected -o/--output, the .eqr file to write")
    return writing(args, "output", "--output", lambda scratch: _import_tensat(args, cast(FileScratch, scratch)))


def _import_tensat(args: argparse.Namespace, scratch: FileScratch) -> int:
    from eqdsl.frontend import check_modules, load_modules, resolve_ruleset
    from eqdsl.frontend.parse import parse_text
    from eqdsl.importers.taso import import_rules

    text = import_rules(Path(args.file), Path(args.multi) if args.multi else None,
                        Path(args.predefined) if args.predefined else None)
    out = Path(args.output)
    # check before writing: a file that does not check is never written
    modules = load_modules(resolve_ruleset("tensor"))
    lang = check_modules(modules + [parse_text(text, str(out))])
    written = scratch.write_text(text)
    imported = [r for r in lang.rules if r.span.file == str(out)]  # not the included languages' own
    print(f"wrote {published(written, out)}: {sum(not r.is_multi for r in imported)} single-pattern and "
          f"{sum(r.is_multi for r in imported)} multi-pattern rules")
    return 0


def _import_onnx(args: argparse.Namespace, scratch: FileScratch | None) -> int:
    from collections import Counter

    from eqdsl.frontend import load_language
    from eqdsl.onnx import require_onnx

    require_onnx()
    from eqdsl.ir.text import program_text
    from eqdsl.onnx.read import read_onnx

    if args.system == "onnx" and (args.multi or args.predefined):
        raise EqdslError.one("import onnx: --multi and --predefined are for `import tensat`")
    imported = read_onnx(Path(args.file), load_language("tensat"), dict(args.shape or []), dict(args.constant or []))
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    text = f"# imported from {args.file} by `eqdsl import onnx`\n" + program_text(imported.program)
    counts = Counter(n.op for n in imported.program.nodes)
    summary = ", ".join(f"{n} {op}" for op, n in sorted(counts.items()) if op not in ("input", "typed_input", "weight"))
    if scratch is None:
        print(text, end="")
    else:
        written = scratch.write_text(text)
        print(f"wrote {published(written, args.output)}: program {imported.program.name}, "
              f"{len(imported.weights)} weights; {summary}")
    return 0


def cmd_export(args: argparse.Namespace) -> Work:
    return writing(args, "output", "--output", lambda scratch: _export(args, cast(FileScratch, scratch)))


def _export(args: argparse.Namespace, scratch: FileScratch) -> int:
    from eqdsl.frontend import load_language
    from eqdsl.onnx import require_onnx
    from eqdsl.onnx.weights import random_weights
    from eqdsl.onnx.write import write_program

    require_onnx()

    lang = load_language(args.ruleset, Path.cwd())
    program = _export_program(args, lang)
    weights = weights_from(Path(args.weights), lang) if args.weights else random_weights(program, args.seed)
    files = write_program(lang, program, weights, scratch.file)
    written = scratch.publish(files)  # a weights file is checked like the model: never over a file not to replace
    source = f"weights from {args.weights}" if args.weights else "random weights (seeded)"
    shown = [published(written, args.output), *files[1:]]
    print(f"wrote {', '.join(shown)}: program {program.name}, {len(program.nodes)} nodes, {source}")
    return 0


def _export_program(args: argparse.Namespace, lang):
    from eqdsl.frontend import load_program_file
    from eqdsl.sources.models import ModelSource

    if (args.program is None) == (args.builder is None):
        raise EqdslError.one("export onnx: expected a PROGRAM.eqr or --builder NAME (one of them)")
    if args.builder is not None:
        from eqdsl.sources.base import ProgramRef

        params = tuple(param_flag(p) for p in args.param or [])
        return ModelSource(args.builder).load(ProgramRef(args.builder, params, Path.cwd()), lang).program
    programs = load_program_file(Path(args.program), lang)
    if args.name is None and len(programs) != 1:
        raise EqdslError.one(f"{args.program}: expected one program (or --name), found {', '.join(programs)}")
    name = args.name or next(iter(programs))
    if name not in programs:
        raise EqdslError.one(f"{args.program}: no program named {name!r}; found {', '.join(programs)}")
    return programs[name]


def _file_commands(sub) -> None:
    c = sub.add_parser("extract", help="extract from an egraph-serialize JSON file")
    c.add_argument("egraph", help="an egraph-serialize JSON file (egglog's, extraction-gym's)")
    c.add_argument("--extractor", choices=extractor_names(), default="cpsat",
                   help="; ".join(f"{k.name}: {k.summary}" for k in map(EXTRACTORS.get, extractor_names()) if k)
                   + " (default: cpsat)")
    taken: set[str] = set()
    add_flags(c, ExtractConfig, taken)
    for section, kinds in option_classes().items():  # every kind's own `extract:` keys, as flags
        add_flags(c, section, taken, " and ".join(kinds))
    c.add_argument("-o", "--out", "--output", dest="out", help="write the chosen nodes as JSON here (a new file)")
    c.add_argument("--force", action="store_true", help="replace --out if it exists")
    c.set_defaults(fn=cmd_extract)
    c = sub.add_parser("import", help="import TENSAT rules or an ONNX model")
    c.add_argument("system", choices=["tensat", "onnx"], help="what FILE is: TENSAT rules or an ONNX model")
    c.add_argument("file", help="TENSAT single-pattern rules (converted.txt), or an ONNX model")
    c.add_argument("--multi", help="TENSAT multi-pattern rules (converted_multi.txt)")
    c.add_argument("--predefined", help="TENSAT's predefined rules (predefined.txt)")
    c.add_argument("--shape", action="append", type=shape_flag, metavar="INPUT=D1,D2,...",
                   help="onnx: the dimensions of an input with dynamic ones (repeatable), e.g. x=1,3,224,224")
    c.add_argument("--constant", action="append", type=constant_flag, metavar="INPUT=NUMBER",
                   help="onnx: fix a (non-float) input to a value (repeatable), e.g. sr=16000")
    c.add_argument("-o", "--output", help="the .eqr file to write (a new file; onnx: default stdout)")
    c.add_argument("--force", action="store_true", help="replace --output if it exists")
    c.set_defaults(fn=cmd_import)
    c = sub.add_parser("export", help="write a program (a .eqr file or a model builder) as an ONNX model")
    c.add_argument("format", choices=["onnx"], help="the format to write")
    c.add_argument("program", nargs="?", help="a .eqr file holding `program` blocks")
    c.add_argument("--name", help="which program of the file")
    c.add_argument("--builder", help="a model builder (vgg19, bert, vit_base, ...)")
    c.add_argument("--param", action="append", help="a builder parameter NAME=INT (repeatable)")
    c.add_argument("--ruleset", default="tensat", help="the language the program is written in")
    c.add_argument("--weights", help="an ONNX model whose initializers hold the weights (default: random)")
    c.add_argument("--seed", type=AT_LEAST_ZERO, default=0, help="seed of the random weights")
    c.add_argument("-o", "--output", required=True, help="the .onnx file to write (a new file)")
    c.add_argument("--force", action="store_true", help="replace --output if it exists")
    c.set_defaults(fn=cmd_export)

