"""What the text front end costs a request before its first audio: `TextFrontend.prepare` (lexicon,
normalisation, splitting) per sentence, over the reading battery's English and Chinese sentences
(tests/text/reading_en.py, reading_zh.py) and a few long everyday ones; median, p95 and worst after
the grammars are loaded, and what loading them costs once.

    python bench/text_bench.py [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import time
from pathlib import Path

from polyvox.text.frontend import TextFrontend

BATTERY = Path(__file__).resolve().parents[1] / "tests" / "text"
LONG = [
    "On March 5, 2024 at 5:30 p.m., 1,234 people paid $12.50 each, 25% more than in the 1990s; "
    "call 555-123-4567 or see order #4521 for details.",
    "The 3rd release, version 2.0.3, cut start-up from 1.5 s to 200 ms and runs at 60 km/h in 3-5 days.",
    "2024年3月5日下午3:30，共有1,234人参加，门票12.50元，比去年增长了25%，联系电话13812345678。",
    "在2024年, Apple sold 200 million iPhones, 比2023年多了5%。",
]


def sentences() -> dict[str, list[str]]:
    english = runpy.run_path(str(BATTERY / "reading_en.py"))["CASES"]
    chinese = runpy.run_path(str(BATTERY / "reading_zh.py"))
    return {
        "en": [text for cases in english.values() for text, _ in cases],
        "zh": [text for text, _ in chinese["KEPT"] + chinese["FIXED"]],
        "long": LONG,
    }


def timings_ms(frontend: TextFrontend, texts: list[str], repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        for text in texts:
            began = time.perf_counter()
            frontend.prepare(text)
            samples.append((time.perf_counter() - began) * 1e3)
    samples.sort()
    return {
        "sentences": len(texts),
        "median_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 3),
        "worst_ms": round(samples[-1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over every sentence")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    frontend = TextFrontend()
    began = time.perf_counter()
    frontend.prepare("I have 3 apples. 我有3个苹果。")  # loads both grammars
    result = {"first_call_ms": round((time.perf_counter() - began) * 1e3, 1)}
    for name, texts in sentences().items():
        result[name] = timings_ms(frontend, texts, args.repeat)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
