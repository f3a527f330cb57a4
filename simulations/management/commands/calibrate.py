"""``manage.py calibrate MANIFEST.json [--format json|table] [--out PROFILE.json]``: fit a fleet's profile.

The manifest names the fleet, its nccl-tests files and its runs' step logs (see
engine/calibration/manifest.py; try examples/calibration/manifest.json). No database needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.calibration.manifest import fit_manifest
from engine.schema.calibration import Profile


class Command(BaseCommand):
    help = "Fit a fleet's calibration profile from its nccl-tests output and step logs (prints JSON)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("manifest", help="calibration manifest (JSON)")
        parser.add_argument("--format", choices=("json", "table"), default="json")
        parser.add_argument("--out", help="also write the whole profile (curves, runs) to this file")
        parser.add_argument("--name", default="", help="profile name (default: the manifest's folder)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            prof = fit_manifest(options["manifest"], name=options["name"])
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"manifest: {exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc).splitlines()[0]) from exc
        if options["out"]:
            Path(options["out"]).write_text(json.dumps(prof.to_dict(), indent=1, allow_nan=False), encoding="utf-8")
        if options["format"] == "json":
            self.stdout.write(json.dumps(prof.summary(), indent=2, allow_nan=False))
        else:
            self.stdout.write(table(prof))


def table(p: Profile) -> str:
    out = [f"{'collective':15s} {'scope':6s} {'bandwidth x (eta)':>20s} {'latency':>22s} {'rms before':>11s} {'after':>7s}"]
    for c in p.collectives:
        lat = (f"{c['alpha_us']:.2f} +- {c['alpha_us_sigma']:.2f} us" if "alpha_us" in c
               else f"x {c['latency_scale']:.2f} +- {c['latency_scale_sigma']:.2f}")
        out.append(f"{c['collective']:15s} {c['scope']:6s} {c['eta']:>11.3f} +- {c['eta_sigma']:.3f} {lat:>22s} "
                   f"{c['rms_rel_error_before']:>10.1%} {c['rms_rel_error']:>7.1%}")
    for prec, g in p.gemm.items():
        bound = " (at its physical bound)" if g.get("at_bound") else ""
        out.append(f"GEMM {prec}: {g['eff']:.3f} +- {g['sigma']:.3f} of peak (engine default {g['default']:.2f}){bound}")
    out.append(f"residual factor: {p.residual['factor']:.3f} +- {p.residual['sigma']:.3f} ({p.residual['reason']})"
               if p.residual else "residual factor: none needed")
    for r in p.runs:
        out.append(f"run {r['id']}: measured {r['measured_step_time_s']:.3f} s, predicted {r['predicted_before_s']:.3f} s "
                   f"({r['error_before']:+.1%}) -> {r['predicted_after_s']:.3f} s ({r['error_after']:+.1%})")
    out += [f"note: {n}" for n in p.notes]
    return "\n".join(out)
