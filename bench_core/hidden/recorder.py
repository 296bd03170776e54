"""The call recorder (copied beside the reference's run as `sitecustomize.py`, with `failatlas_wire.py`): while the
task's own reference command runs, it wraps each masked function once its module is imported (or, for the script
run as `__main__`, once that script first calls one of its functions) and writes what the function was called with
and what it did, as plain data (`failatlas_wire`), one JSON line per call, to the file the spec names.

Trusted code only: it runs in a sandbox holding the task's reference tree, never an agent's. It imports the standard
library and `failatlas_wire` (numpy only when a call is encoded), and never lets its own trouble reach the
reference: whatever goes wrong in recording is a `skip` line, and the reference's call runs exactly once.

Per function, call number n is recorded when n <= 3 or n is a power of two (spread over the run), up to
`max_calls`. A call whose inputs or results are not plain data, or too large, is a `skip` line with the reason.

Observing an agent's run (`observe`, with `sample` slots), every call of every masked function also has the same
chance to be kept whole in a reservoir (Algorithm R per function and process: the first `sample` calls fill its
slots, call n > `sample` replaces a slot drawn at random with probability `sample`/n), drawn from the operating
system's randomness after the call has returned, so no call can know whether it will be kept (every call's inputs
are taken before it runs, the draw comes after); each kept call is its own file, `<record
dir>/sample/<pid>-<function>-<slot>.json`, written whole (a temporary file, then a rename), so a run killed at any
point leaves a sample of every call it made until then.

For the first `perturb_calls` recorded calls of a function, the function is called again (recording off) on two
fresh copies of the recorded inputs (a method on an instance made by `Cls.__new__` with the recorded `__dict__`):
when both give exactly the recorded result, it is deterministic in its inputs, and `perturbations` perturbed
copies are called and recorded with `perturbed: true`, within a time budget per function: float arrays and tensors
scaled and jittered by a seeded generator, and the numbers passed as arguments themselves changed (an integer such
as a seed or a count by 1, then 2; a float scaled); where the reference refuses that copy (an integer that must
match an array's size), the arrays alone are changed, else the numbers alone. Strings, booleans and the instance's
own attributes stay as recorded.
"""

import contextlib
import functools
import json
import os
import sys
import threading
import time


def _start():
    spec_path = os.environ.get("FAILATLAS_RECORD_SPEC")
    if not spec_path:
        return
    with open(spec_path) as handle:
        spec = json.load(handle)
    _Recorder(spec).install()


class _Recorder:
    def __init__(self, spec):
        import failatlas_wire

        self.wire = failatlas_wire
        self.root = os.path.realpath(spec["root"])
        self.out = spec["out"]
        self.max_calls = int(spec.get("max_calls", 8))
        self.max_call_bytes = int(spec.get("max_call_bytes", 1 << 20))
        self.max_total_bytes = int(spec.get("max_total_bytes", 12 << 20))
        self.perturb_calls = int(spec.get("perturb_calls", 2))
        self.perturbations = int(spec.get("perturbations", 2))
        self.extra_budget_s = float(spec.get("extra_budget_s", 30.0))
        self.seed = int(spec.get("seed", 0))
        self.observe = bool(spec.get("observe", False))
        self.sample = int(spec.get("sample", 0)) if self.observe else 0
        self.state_keys = {str(k): set(v) for k, v in (spec.get("state_keys") or {}).items()}
        self.sample_dir = os.path.join(os.path.dirname(self.out), "sample")
        self.pid = os.getpid()
        self.kept = {}  # function index -> calls seen by this process's reservoir
        self.targets = {}  # realpath of the file -> [(index, qualname)]
        for index, target in enumerate(spec["targets"]):
            path = os.path.realpath(os.path.join(self.root, target["path"]))
            self.targets.setdefault(path, []).append((index, target["qualname"]))
        self.seen, self.recorded, self.perturbed_from, self.spent = {}, {}, {}, {}
        self.local = threading.local()
        self.lock = threading.Lock()
        self.done_main = False
        self.full = False

    # ---------------------------------------------------------------------------------------------- installing
    def install(self):
        sys.meta_path.insert(0, _Finder(self))
        main = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        if main in self.targets:
            self.main_file = main
            sys.setprofile(self._profile)
        import atexit

        atexit.register(self._summary)

    def _profile(self, frame, event, arg):
        if event != "call" or self.done_main:
            return
        code = frame.f_code
        if code.co_name == "<module>" or os.path.realpath(code.co_filename) != self.main_file:
            return
        self.done_main = True
        sys.setprofile(None)
        rel = os.path.relpath(self.main_file, self.root)
        root, name = os.path.split(rel)
        self.patch_namespace(frame.f_globals, os.path.splitext(name)[0], root, self.targets[self.main_file])

    def patch_module(self, module, origin):
        """Wrap the targets of the module just executed from `origin`."""
        name = module.__name__
        base = os.path.dirname(origin)
        if os.path.basename(origin) == "__init__.py":
            base = os.path.dirname(base)
        for _ in range(name.count(".")):
            base = os.path.dirname(base)
        root = os.path.relpath(base, self.root)
        if root.startswith(".."):
            return
        self.patch_namespace(vars(module), name, "" if root == "." else root, self.targets[origin])

    def patch_namespace(self, namespace, module, root, targets):
        for index, qualname in targets:
            try:
                self._patch_one(namespace, module, root, index, qualname)
            except Exception as exc:  # noqa: BLE001 - an unpatchable target is a note, never the reference's failure
                self._line({"t": index, "skip": "unpatchable", "why": f"{type(exc).__name__}: {exc}"[:300]})

    def _patch_one(self, namespace, module, root, index, qualname):
        parts = qualname.split(".")
        if "<locals>" in parts:
            self._line({"t": index, "skip": "unpatchable", "why": "a function defined inside another function"})
            return
        if len(parts) == 1:
            func = namespace.get(parts[0])
            if not callable(func):
                raise LookupError(f"{qualname} is not a function of {module}")
            namespace[parts[0]] = self._wrap(func, index, module, root, qualname, "function")
            return
        owner = namespace[parts[0]]
        for part in parts[1:-1]:
            owner = getattr(owner, part)
        raw = owner.__dict__[parts[-1]]
        if isinstance(raw, staticmethod):
            wrapped = staticmethod(self._wrap(raw.__func__, index, module, root, qualname, "function"))
        elif isinstance(raw, classmethod | property) or not callable(raw):
            self._line({"t": index, "skip": "unpatchable", "why": f"a {type(raw).__name__} is not replayed"})
            return
        else:
            wrapped = self._wrap(raw, index, module, root, qualname, "method")
        setattr(owner, parts[-1], wrapped)

    # ----------------------------------------------------------------------------------------------- recording
    def _wrap(self, func, index, module, root, qualname, kind):
        recorder = self

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if getattr(recorder.local, "busy", False):
                return func(*args, **kwargs)
            with recorder.lock:
                n = recorder.seen[index] = recorder.seen.get(index, 0) + 1
                wanted = (not recorder.full and recorder.recorded.get(index, 0) < recorder.max_calls
                          and (n <= 3 or n & (n - 1) == 0))
            if not wanted and not recorder.sample:
                return func(*args, **kwargs)
            # sampling, every call's inputs are taken: whether it is kept is drawn after it has returned
            case = recorder._inputs(index, module, root, qualname, kind, args, kwargs, quiet=not wanted)
            start = time.monotonic()
            value = func(*args, **kwargs)
            if case is not None:
                duration = time.monotonic() - start
                kept = recorder._slot(index) if recorder.sample else None
                if kept is not None:
                    recorder._keep(dict(case), args, value, kwargs, kept, duration)
                if wanted:
                    recorder._finish(case, func, args, value, duration, kwargs)
            return value

        return wrapper

    def _slot(self, index):
        """(slot, call number in this process) for this call of function `index` in the reservoir, or None: drawn
        from the operating system's randomness after the call has returned (module docstring)."""
        with self.lock:
            if os.getpid() != self.pid:  # a forked worker: a reservoir of its own
                self.pid, self.kept = os.getpid(), {}
            n = self.kept[index] = self.kept.get(index, 0) + 1
        if n <= self.sample:
            return n - 1, n
        drawn = int.from_bytes(os.urandom(8), "big") % n
        return (drawn, n) if drawn < self.sample else None

    def _keep(self, case, args, value, kwargs, kept, duration):
        """Write one kept call to its reservoir slot, whole or not at all (a skip is a note, never the run's)."""
        index, (slot, n) = case["t"], kept
        try:
            case.update(self._outputs(case, args, value, kwargs), duration=duration, perturbed=False, n=n,
                        pid=os.getpid())
            text = json.dumps(case, separators=(",", ":"))
        except Exception as exc:  # noqa: BLE001 - a result that is not plain data
            text = json.dumps({"t": index, "n": n, "pid": os.getpid(), "skip": "unencodable",
                               "why": f"result: {type(exc).__name__}: {exc}"[:300]})
        if len(text) > self.max_call_bytes:  # the slot still holds a line: a reservoir is whole or was tampered with
            text = json.dumps({"t": index, "n": n, "pid": os.getpid(), "skip": "too_large",
                               "why": f"{len(text)} bytes"})
        with contextlib.suppress(OSError):
            os.makedirs(self.sample_dir, exist_ok=True)
            path = os.path.join(self.sample_dir, f"{os.getpid()}-{index}-{slot}.json")
            tmp = f"{path}.{threading.get_ident()}.tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)

    def _inputs(self, index, module, root, qualname, kind, args, kwargs, quiet=False):
        """The call's inputs as plain data (copied now: the call may change them), or None (a skip line, unless
        `quiet`: a call taken only for the sample is counted by the reservoir's notes, not one line per call)."""
        try:
            if kind == "method":
                if not args or not hasattr(args[0], "__dict__"):
                    if not quiet:
                        self._line({"t": index, "skip": "unencodable", "why": "an instance without __dict__"})
                    return None
                state, args = self._attributes(args[0], index), args[1:]
            else:
                state = None
            case = {"t": index, "module": module, "root": root, "qualname": qualname, "kind": kind,
                    "args": self.wire.to_plain(list(args)), "kwargs": self.wire.to_plain(dict(kwargs)),
                    "state": state}
            return case
        except Exception as exc:  # noqa: BLE001 - WireError, RecursionError, a __dict__ that misbehaves
            if not quiet:
                self._line({"t": index, "skip": "unencodable", "why": f"inputs: {type(exc).__name__}: {exc}"[:300]})
            return None

    def _attributes(self, instance, index=None):
        """The instance's `__dict__` as plain data. Observing an agent's run, an attribute that is not plain data
        (a generator, a cache) is left out by itself, so a correct method keeping one more attribute of its own is
        still recorded; recording the reference, the call is skipped (its replay could not rebuild the instance).
        Where the reference's own calls of the function are known (`state_keys`), only their attributes are kept:
        what the comparison reads, and no attribute of the agent's own can make a call too large to be kept."""
        if not self.observe:
            return self.wire.to_plain(dict(vars(instance)))
        keys = self.state_keys.get(str(index)) if index is not None else None
        out = {}
        for key, value in dict(vars(instance)).items():
            if keys is not None and key not in keys:
                continue
            try:
                out[key] = self.wire.to_plain({key: value})[key]
            except Exception:  # noqa: BLE001 - WireError, RecursionError, a value that misbehaves: left out
                continue
        return out

    def _outputs(self, case, args, value, kwargs=None, before=None):
        """The call's results as plain data: the return value (or that it returned the instance), a method's
        instance `__dict__` after, and each argument the call changed in place (`mutated`: its value after, by
        position or keyword, compared with `before`, the inputs as recorded), so an in-place function is judged on
        what it does to its arguments, not only on its None."""
        instance = args[0] if case["kind"] == "method" else None
        is_self = instance is not None and value is instance
        out = {"self": is_self, "ret": None if is_self else self.wire.to_plain(value)}
        if instance is not None:
            out["after"] = self._attributes(instance, case["t"])
        before = before if before is not None else case
        plain_args = self.wire.to_plain(list(args[1:] if instance is not None else args))
        plain_kwargs = self.wire.to_plain(dict(kwargs or {}))
        pairs = zip(plain_args, before["args"], strict=False)
        mutated = {"args": {str(i): v for i, (v, b) in enumerate(pairs) if v != b},
                   "kwargs": {k: v for k, v in plain_kwargs.items() if k in before["kwargs"]
                              and v != before["kwargs"][k]}}
        if mutated["args"] or mutated["kwargs"]:
            out["mutated"] = mutated
        return out

    def _finish(self, case, func, args, value, duration, kwargs=None):
        index = case["t"]
        try:
            case.update(self._outputs(case, args, value, kwargs), duration=duration, perturbed=False)
            text = json.dumps(case, separators=(",", ":"))
        except Exception as exc:  # noqa: BLE001 - a result that is not plain data
            self._line({"t": index, "skip": "unencodable", "why": f"result: {type(exc).__name__}: {exc}"[:300]})
            return
        if len(text) > self.max_call_bytes:
            self._line({"t": index, "skip": "too_large", "why": f"{len(text)} bytes"})
            return
        if not self._write(text):
            return
        with self.lock:
            self.recorded[index] = self.recorded.get(index, 0) + 1
            extra = self.perturbed_from.get(index, 0) < self.perturb_calls
            if extra:
                self.perturbed_from[index] = self.perturbed_from.get(index, 0) + 1
        if extra:
            self.local.busy = True
            try:
                self._perturb_case(case, func, text)
            except Exception as exc:  # noqa: BLE001 - recording trouble never reaches the reference
                self._line({"t": index, "skip": "perturbation", "why": f"{type(exc).__name__}: {exc}"[:300]})
            finally:
                self.local.busy = False

    def _call(self, case, func, inputs):
        """Call `func` on fresh copies of `inputs` (args, kwargs, state) the way the replay does; its outputs."""
        args, kwargs, state = (self.wire.decode(json.dumps(inputs[k]), torch=True) for k in ("args", "kwargs", "state"))
        if case["kind"] == "method":
            owner = self._owner(func, case)
            instance = owner.__new__(owner)
            vars(instance).update(state)
            args = [instance, *args]
        value = func(*args, **kwargs)
        return self._outputs(case, args, value, kwargs, before=inputs)

    def _owner(self, func, case):
        module = sys.modules.get(func.__module__)
        owner = module
        for part in case["qualname"].split(".")[:-1]:
            owner = getattr(owner, part)
        return owner

    def _budget_left(self, index, cost):
        return self.spent.get(index, 0.0) + cost <= self.extra_budget_s

    def _perturb_case(self, case, func, text):
        index = case["t"]
        recorded = {"self": case["self"], "ret": case["ret"], "after": case.get("after"),
                    "mutated": case.get("mutated")}
        inputs = {k: case[k] for k in ("args", "kwargs", "state")}
        want = json.dumps(recorded, separators=(",", ":"))
        cost = max(case["duration"], 0.001)
        if not self._budget_left(index, cost * (2 + self.perturbations)):
            return
        start = time.monotonic()
        try:
            same = all(json.dumps(self._ret_after(self._call(case, func, inputs)), separators=(",", ":")) == want
                       for _ in range(2))
        finally:
            self.spent[index] = self.spent.get(index, 0.0) + time.monotonic() - start
        if not same:
            self._line({"t": index, "skip": "nondeterministic", "why": "two calls on copies of the recorded "
                        "inputs did not both give the recorded result"})
            return
        import numpy as np

        rng = np.random.default_rng([self.seed, index, self.perturbed_from.get(index, 0)])
        original = json.dumps(inputs)
        for shift in range(self.perturbations):
            candidates = []  # arrays and scalars changed; else arrays only; else scalars only
            for arrays, scalars in ((True, True), (True, False), (False, True)):
                decoded = {k: self.wire.decode(json.dumps(v), torch=True) for k, v in inputs.items()}
                changed = {k: self.wire.to_plain(_perturbed(v, rng, np) if arrays else v)
                           for k, v in decoded.items()}
                if scalars:
                    changed = _scalars_shifted(changed, shift, rng)
                if json.dumps(changed) not in (original, *map(json.dumps, candidates)):
                    candidates.append(changed)
            if not candidates:
                self._line({"t": index, "skip": "unperturbable", "why": "no float array, tensor or number among "
                            "the arguments"})
                return
            out = None
            start = time.monotonic()
            try:
                for changed in candidates:
                    try:
                        out = self._call(case, func, changed)
                        break
                    except Exception as exc:  # noqa: BLE001 - the reference refuses this input: the next one
                        self._line({"t": index, "skip": "perturbed_raised", "why": f"{type(exc).__name__}"})
            finally:
                self.spent[index] = self.spent.get(index, 0.0) + time.monotonic() - start
            if out is None:
                continue
            line = {**{k: v for k, v in case.items() if k != "mutated"}, **changed, **out, "perturbed": True,
                    "duration": time.monotonic() - start}
            text = json.dumps(line, separators=(",", ":"))
            if len(text) > self.max_call_bytes or not self._write(text):
                return

    @staticmethod
    def _ret_after(out):
        return {"self": out["self"], "ret": out["ret"], "after": out.get("after"), "mutated": out.get("mutated")}

    # ------------------------------------------------------------------------------------------------- output
    def _write(self, text, note=False):
        """Append one line; a case past `max_total_bytes` is not written and ends recording (notes have 256 KiB
        more, so the skips and the summary still fit)."""
        data = (text + "\n").encode("utf-8")
        limit = self.max_total_bytes + (256 << 10 if note else 0)
        with self.lock:
            fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                if os.fstat(fd).st_size + len(data) > limit:
                    self.full = self.full or not note
                    return False
                os.write(fd, data)
            finally:
                os.close(fd)
        return True

    def _line(self, record):
        with contextlib.suppress(Exception):  # a note that cannot be written is dropped
            self._write(json.dumps(record, separators=(",", ":")), note=True)

    def _summary(self):
        self._line({"seen": {str(k): v for k, v in self.seen.items()}, "pid": os.getpid()})


def _scalars_shifted(inputs, shift, rng):
    """`inputs` (plain data) with each number among the arguments themselves changed: an integer (a seed, a count,
    an index; not a boolean) by 1 + `shift`, a float scaled by U(0.7, 1.3); the instance's state unchanged."""

    def changed(value):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
        return value + 1 + shift if isinstance(value, int) else value * float(rng.uniform(0.7, 1.3))

    out = dict(inputs)
    out["args"] = [changed(v) for v in inputs["args"]]
    out["kwargs"] = {k: changed(v) for k, v in inputs["kwargs"].items()}
    return out


def _perturbed(value, rng, np):
    """`value` with every float array or tensor scaled by U(0.7, 1.3) and jittered by 10% of its spread."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
        array = _perturbed(value.detach().to("cpu", torch.float64).numpy(), rng, np)
        return torch.from_numpy(array).to(dtype=value.dtype, device=value.device).requires_grad_(value.requires_grad)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
        finite = value[np.isfinite(value)]
        spread = float(finite.std()) if finite.size else 0.0
        noise = rng.normal(size=value.shape) * 0.1 * (spread if spread > 0 else 1.0)
        return (value * rng.uniform(0.7, 1.3) + noise).astype(value.dtype)
    if isinstance(value, list):
        return [_perturbed(v, rng, np) for v in value]
    if isinstance(value, dict):
        return {k: _perturbed(v, rng, np) for k, v in value.items()}
    return value


class _Loader:
    """The module's own loader, with the targets wrapped once the module has run."""

    def __init__(self, loader, recorder, origin):
        self._loader, self._recorder, self._origin = loader, recorder, origin

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._recorder.patch_module(module, self._origin)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder:
    def __init__(self, recorder):
        self.recorder = recorder

    def find_spec(self, name, path=None, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        origin = os.path.realpath(spec.origin) if spec.origin and spec.has_location else None
        if origin in self.recorder.targets and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self.recorder, origin)
        return spec


try:
    _start()
except Exception as _exc:  # noqa: BLE001 - the reference runs unrecorded rather than not at all
    sys.stderr.write(f"failatlas recorder: not recording: {type(_exc).__name__}: {_exc}\n")
