"""A small, seeded, synthetic stand-in for MovieLens 1M and its ranking runs, for AutoExperiment paper 2205.00048.

    python benchmarks/standin_ml1m.py OUT [--users 200] [--items 240] [--seed 0] [--models Pop,BPRMF]

JME-Fairness (`src/run_metric.py`) reads MovieLens 1M and pretrained ranking runs, neither of which is in the public
copy of its code. This writes data of the same formats, invented here (not MovieLens: no real user, movie or
rating), so that the rows' experiment commands run end to end; the numbers they print are then the stand-in's,
taken from gold's run, never the paper's. The same arguments give byte-identical files.

Layout of OUT (give it as `--data ml1m=OUT`; a data name is an identifier, so not `ml-1m`):

    OUT/ratings.dat   UserID::MovieID::Rating::Timestamp     (every user >= 20 ratings, one of them >= 4)
    OUT/users.dat     UserID::Gender::Age::Occupation::Zip-code
    OUT/movies.dat    MovieID::Title (Year)::Genre|Genre...   (latin-1, as the real file)
    OUT/runs/run-<model>-ml-1M-fold1.txt.gz   TREC run: user<TAB>Q0<TAB>movie<TAB>rank<TAB>score<TAB>model,
                      100 unrated movies per user, best first

The code expects `src/datasets/ml-1m/{ratings,users,movies}.dat` and `src/models/ml/run-<model>-ml-1M-fold1.txt.gz`
relative to the folder it runs from: link those files to OUT's, and `src/models/ml` to `OUT/runs`.

Every category the code indexes is present, so none of its groups is empty: both genders, the 7 age codes, the 21
occupations (the code needs them numbered 0..20 without a gap) and the 18 genres; every movie has a rating >= 4
and every user one, so the relevance matrix spans all users and movies. MovieIDs are sparse in 1..3952, as in the
real file, so the code's re-indexing is exercised. Pop scores are a movie's share of the most-rated movie's
ratings (the code multiplies them by 10); BPRMF scores are dot products of seeded latent factors.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np

GENRES = ("Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama", "Fantasy",
          "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")
AGES = (1, 18, 25, 35, 45, 50, 56)
AGE_WEIGHTS = (0.04, 0.18, 0.35, 0.2, 0.09, 0.08, 0.06)  # roughly the real file's shares
OCCUPATIONS = 21
RATING_WEIGHTS = (0.06, 0.11, 0.26, 0.35, 0.22)  # stars 1..5
MAX_MOVIE_ID = 3952
RUN_DEPTH = 100  # the code reshapes each run to (users, 100)
MODELS = ("Pop", "BPRMF")  # the models the experiment commands of the 2205.00048 rows name
WORDS = ("Night", "River", "Summer", "Stranger", "Garden", "City", "Winter", "Promise", "Shadow", "Journey",
         "Island", "Letter", "Dream", "Machine", "Heart", "Road")
ACCENTED = ("Café", "Über", "Señor", "Mémoire", "Noël")  # the real file is latin-1 with such titles


def generate(out: Path, users: int = 200, items: int = 240, seed: int = 0,
             models: tuple[str, ...] = MODELS) -> dict[str, int]:
    """Write the stand-in into `out` (created if missing) and return its counts.

    Raises ValueError when `items` leaves a user fewer than 100 unrated movies to rank, or `users` cannot hold every
    age and occupation code.
    """
    if users < OCCUPATIONS:
        raise ValueError(f"--users must be at least {OCCUPATIONS} (one per occupation code)")
    if items < RUN_DEPTH + 60:
        raise ValueError(f"--items must be at least {RUN_DEPTH + 60} (100 unrated movies per user)")
    unknown = set(models) - set(MODELS)
    if unknown:
        raise ValueError(f"no scorer for model(s) {sorted(unknown)}; known: {', '.join(MODELS)}")
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    movie_ids = np.sort(rng.choice(np.arange(1, MAX_MOVIE_ID + 1), size=items, replace=False))
    _write_users(out / "users.dat", users, rng)
    _write_movies(out / "movies.dat", movie_ids, rng)
    rated = _write_ratings(out / "ratings.dat", users, items, movie_ids, rng)
    if ((rated == 0).sum(1) < RUN_DEPTH).any():
        raise ValueError(f"--items {items} leaves a user fewer than {RUN_DEPTH} unrated movies to rank")
    (out / "runs").mkdir(exist_ok=True)
    counts = rated.sum(0)
    for model in models:
        if model == "Pop":
            scores = np.tile(counts / counts.max(), (users, 1))
        else:
            factors = 16
            u = rng.normal(0, 0.5, (users, factors))
            v = rng.normal(0, 0.5, (items, factors))
            scores = u @ v.T + 0.3 * np.log1p(counts)[None, :]
        _write_run(out / "runs" / f"run-{model}-ml-1M-fold1.txt.gz", model, scores, rated, movie_ids)
    return {"users": users, "movies": items, "ratings": int(rated.astype(bool).sum()), "runs": len(models)}


def _write_users(path: Path, users: int, rng: np.random.Generator) -> None:
    gender = np.where(rng.random(users) < 0.28, "F", "M")
    age = rng.choice(AGES, size=users, p=AGE_WEIGHTS)
    occupation = rng.integers(0, OCCUPATIONS, size=users)
    gender[:2] = ("F", "M")  # every category at least once, whatever the seed
    age[: len(AGES)] = AGES
    occupation[:OCCUPATIONS] = np.arange(OCCUPATIONS)
    order = rng.permutation(users)
    gender, age, occupation = gender[order], age[order], occupation[order]
    zips = rng.integers(1000, 99999, size=users)
    with open(path, "w", encoding="latin-1", newline="\n") as f:
        for i in range(users):
            zip_code = f"{zips[i]:05d}" + (f"-{zips[i] % 9000 + 1000}" if i % 97 == 13 else "")
            f.write(f"{i + 1}::{gender[i]}::{age[i]}::{occupation[i]}::{zip_code}\n")


def _write_movies(path: Path, movie_ids: np.ndarray, rng: np.random.Generator) -> None:
    items = len(movie_ids)
    genre_sets = [set(rng.choice(len(GENRES), size=rng.integers(1, 4), replace=False).tolist())
                  for _ in range(items)]
    for g in range(len(GENRES)):  # every genre on at least one movie
        genre_sets[g % items].add(g)
    with open(path, "w", encoding="latin-1", newline="\n") as f:
        for k, movie in enumerate(movie_ids):
            words = " ".join(rng.choice(WORDS, size=rng.integers(1, 3), replace=False))
            title = f"{words} {k}"
            if k % 11 == 3:
                title = f"{ACCENTED[k % len(ACCENTED)]} {title}"
            if k % 7 == 2:
                title = f"{title}: Part {k % 3 + 2}"
            if k % 13 == 5:
                title = f"{title}, The"
            genres = "|".join(GENRES[g] for g in sorted(genre_sets[k]))
            f.write(f"{movie}::{title} ({rng.integers(1919, 2001)})::{genres}\n")


def _write_ratings(path: Path, users: int, items: int, movie_ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The ratings as a users x items matrix of stars (0: unrated), after writing them."""
    popularity = 1.0 / np.arange(1, items + 1) ** 0.8
    popularity = popularity[rng.permutation(items)]
    popularity /= popularity.sum()
    stars = np.zeros((users, items), dtype=np.int8)
    for u in range(users):
        chosen = rng.choice(items, size=rng.integers(20, 61), replace=False, p=popularity)
        stars[u, chosen] = rng.choice(np.arange(1, 6), size=len(chosen), p=RATING_WEIGHTS)
        if stars[u].max() < 4:
            stars[u, chosen[0]] = 4
    for i in np.flatnonzero(stars.max(0) < 4):  # every movie liked once, so the relevance matrix spans it
        unrated = np.flatnonzero(stars[:, i] == 0)
        stars[unrated[np.argmin((stars[unrated] > 0).sum(1))], i] = 5  # the user with the fewest ratings
    times = rng.integers(956_703_932, 1_046_454_590, size=stars.shape)
    with open(path, "w", encoding="latin-1", newline="\n") as f:
        for u in range(users):
            for i in np.flatnonzero(stars[u]):
                f.write(f"{u + 1}::{movie_ids[i]}::{stars[u, i]}::{times[u, i]}\n")
    return stars


def _write_run(path: Path, model: str, scores: np.ndarray, rated: np.ndarray, movie_ids: np.ndarray) -> None:
    lines = []
    for u in range(scores.shape[0]):
        s = np.where(rated[u] > 0, -np.inf, scores[u])
        top = np.argsort(-s, kind="stable")[:RUN_DEPTH]
        lines += [f"{u + 1}\tQ0\t{movie_ids[i]}\t{r + 1}\t{s[i]:.6f}\t{model}\n" for r, i in enumerate(top)]
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write("".join(lines).encode("ascii"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write (created if missing)")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--items", type=int, default=240, help="movies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated; known: " + ", ".join(MODELS))
    args = parser.parse_args()
    try:
        counts = generate(args.out, args.users, args.items, args.seed, tuple(args.models.split(",")))
    except ValueError as e:
        parser.error(str(e))
    print(f"wrote {args.out}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
