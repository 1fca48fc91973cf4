"""Training settings: the optimizers a Trainer offers, and the settings a project recommends for a
page (``metadata["training"]``), checked as data from a file (training.py uses both, and
re-exports them)."""
from __future__ import annotations

import json
from typing import NamedTuple

from blockflow.project import Page

__all__ = ["OPTIMIZERS", "optimizer_defaults", "recommended_settings", "SettingProblem", "MAX_STEPS",
           "MAX_BATCH_SIZE", "MAX_SEED", "MAX_SETTING", "DECAY_RATES", "decay_rate_problem"]

#: optimizer name -> (Apply* block, {hyperparameter: default}); the learning rate is "lr"
OPTIMIZERS: dict[str, tuple[str, dict]] = {
    "sgd": ("ApplyGradientDescent", {"lr": 0.01}),
    "momentum": ("ApplyMomentum", {"lr": 0.01, "momentum": 0.9, "use_nesterov": False}),
    "adam": ("ApplyAdam", {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}),
    "rmsprop": ("ApplyRMSProp", {"lr": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7}),
    "adagrad": ("ApplyAdagrad", {"lr": 0.01}),
}
def optimizer_defaults(name: str) -> dict:
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r} (choose from {', '.join(OPTIMIZERS)})")
    return dict(OPTIMIZERS[name][1])



#: The largest values a project may recommend (the Train panel's ranges): past them, or ill-typed,
#: a recommendation is a problem reported with its place and left out.
MAX_STEPS = 10_000_000
MAX_BATCH_SIZE = 10_000_000
MAX_SEED = 2 ** 31 - 1
MAX_SETTING = 1e6      # the learning rate and the optimizers' other number settings
#: Decay rates, below 1: an average kept as rate * old + (1 - rate) * new. At 1 Adam's first step
#: divides 0 by 0 (1 - beta1 ** t); above it an average of squares turns negative and its square
#: root NaN (beta2, rho), or Adam's steps change sign and size without a word (beta1). Each was a
#: NaN at step 0 that a smaller learning rate was said to help, or a training gone wrong silently.
DECAY_RATES = ("beta1", "beta2", "rho")


def decay_rate_problem(key: str, v) -> str:
    """Why ``v`` cannot be setting ``key``, a decay rate ("" when it can, or ``key`` is none)."""
    if key in DECAY_RATES and v >= 1:
        return f"must be below 1 (a decay rate), found {_shown(v)}"
    return ""


class SettingProblem(NamedTuple):
    """A recommended training setting that was left out: ``place`` is its JSON path in the file
    (``metadata.training.main.steps``), ``key`` the setting's name (None for the whole entry)."""

    place: str
    key: str | None
    message: str

    def __str__(self):
        return f"{self.place}: {self.message}"


#: Unknown settings named one by one; the others are counted in one more problem (a file of 2.7 MB
#: holding 200,000 of them printed 43 MB of warnings, and listed them all in the editor's panels).
LISTED_UNKNOWN = 8
#: The longest key quoted whole in a setting's place (a longer one is cut, ``...`` added; a page is named whole).
_PLACE_CHARS = 40


def _setting_place(page: str, key: str | None = None) -> str:
    """The JSON path of a page's recommendation: ``metadata.training.main.steps``, with names that
    are not plain identifiers quoted (``metadata.training["my page"]``); a key is cut past
    _PLACE_CHARS (the page's name, the user's, is named whole as everywhere else)."""
    def part(name, cut=False):
        if cut and len(name) > _PLACE_CHARS:
            return f"[{json.dumps(name[:_PLACE_CHARS])[:-1]}...\"]"
        return f".{name}" if name.isidentifier() else f"[{json.dumps(name)}]"
    return "metadata.training" + part(page) + (part(key, cut=True) if key is not None else "")


def _whole(v, lo: int, hi: int, what: str = "a whole number") -> str | None:
    """Why ``v`` is not a whole number from ``lo`` to ``hi`` (None when it is)."""
    if isinstance(v, bool) or not isinstance(v, int):
        return f"must be {what} from {lo:,} to {hi:,}, found {_shown(v)}"
    if not lo <= v <= hi:
        return f"{_shown(v)} is out of range: {what} from {lo:,} to {hi:,}"
    return None


def _shown(v) -> str:
    """A value from the file, short and on one line (JSON escapes its control characters)."""
    if isinstance(v, int) and not isinstance(v, bool):
        digits = str(abs(v))
        text = f"{v:,}" if len(digits) <= 30 else f"{'-' if v < 0 else ''}a {len(digits)}-digit number"
    elif isinstance(v, (bool, float, str, type(None))):
        text = json.dumps(v, allow_nan=True)
    else:
        text = f"a{'n' if type(v).__name__[0] in 'aeiou' else ''} {type(v).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def recommended_settings(project, page: str | None = None, problems: list | None = None) -> dict:
    """The training settings a project recommends for a page (a name, None for the first page, or
    the Page): ``metadata["training"][page]``, a
    JSON object with any of ``optimizer``, ``steps``, ``batch_size``, ``seed``, ``lr`` and the
    optimizers' other settings (``momentum``, ``beta1``...); null is no recommendation (for
    ``batch_size``: as the dataset blocks say). The file is data: an entry that is ill-typed or
    out of range (see MAX_STEPS...) is left out (the caller's own default applies),
    and when ``problems`` is a list, a :class:`SettingProblem` is appended to it for each such
    entry and each unknown key."""
    # A Page itself is taken as it is (the editor asks for every page: looking each name up
    # again would scan the page list once per page).
    name = page.name if isinstance(page, Page) else project.page(page).name
    report = problems.append if problems is not None else (lambda _item: None)
    table = project.metadata.get("training") if isinstance(project.metadata, dict) else None
    if table is not None and not isinstance(table, dict):
        report(SettingProblem("metadata.training", None,
                              f"must be an object of page names to settings, found {_shown(table)}"))
        return {}
    entry = table.get(name) if table is not None else None
    if entry is None:
        return {}
    if not isinstance(entry, dict):
        report(SettingProblem(_setting_place(name), None, f"must be an object of settings, found {_shown(entry)}"))
        return {}
    out: dict = {}
    optimizer = entry.get("optimizer")
    if optimizer is not None:
        if isinstance(optimizer, str) and optimizer in OPTIMIZERS:
            out["optimizer"] = optimizer
        else:
            report(SettingProblem(_setting_place(name, "optimizer"), "optimizer",
                                  f"unknown optimizer {_shown(optimizer)} (choose from {', '.join(OPTIMIZERS)})"))
    _whole_settings(entry, name, report, out)
    hyper = _number_settings(entry, name, report, optimizer_defaults(out.get("optimizer", "adam")))
    if hyper:
        out["hyper"] = hyper
    return out


def _whole_settings(entry: dict, name: str, report, out: dict) -> None:
    """Steps, seed and batch size: whole numbers in range (a null batch size is kept)."""
    for key, hi in (("steps", MAX_STEPS), ("seed", MAX_SEED), ("batch_size", MAX_BATCH_SIZE)):
        if entry.get(key) is None:    # absent or null: no recommendation
            if key == "batch_size" and key in entry:
                out[key] = None       # null batch size: as the dataset blocks say
            continue
        why = _whole(entry[key], 0, hi, "null or a whole number" if key == "batch_size" else "a whole number")
        if why is None:
            out[key] = entry[key]
        else:
            report(SettingProblem(_setting_place(name, key), key, why))


def _number_settings(entry: dict, name: str, report, chosen: dict) -> dict:
    """The optimizers' other settings the ``chosen`` optimizer takes; every key no optimizer
    knows, and every value out of range, is reported."""
    numbers = {k: d for opt in OPTIMIZERS.values() for k, d in opt[1].items()}
    hyper = {}
    unknown = []
    for key, v in entry.items():
        if key in ("optimizer", "steps", "seed", "batch_size") or v is None:
            continue
        if key not in numbers:
            unknown.append(key)
            if len(unknown) <= LISTED_UNKNOWN:
                report(SettingProblem(_setting_place(name, key), key,
                                      f"unknown setting (settings: optimizer, steps, batch_size, seed, "
                                      f"{', '.join(numbers)})"))
            continue
        if isinstance(numbers[key], bool):
            ok = isinstance(v, bool)
            why = f"must be true or false, found {_shown(v)}"
        else:
            # A comparison, not math.isfinite: that raises for an int too big for a float.
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_SETTING
            why = f"must be a number from 0 to {MAX_SETTING:g}, found {_shown(v)}"
            if ok and decay_rate_problem(key, v):
                ok, why = False, decay_rate_problem(key, v)
        if not ok:
            report(SettingProblem(_setting_place(name, key), key, why))
        elif key in chosen:
            hyper[key] = v if isinstance(v, bool) else float(v)
    if len(unknown) > LISTED_UNKNOWN:
        key = unknown[LISTED_UNKNOWN]
        report(SettingProblem(_setting_place(name, key), key,
                              f"unknown setting, and {len(unknown) - LISTED_UNKNOWN - 1:,} more after it "
                              f"(the first {LISTED_UNKNOWN} are named)"))
    return hyper
