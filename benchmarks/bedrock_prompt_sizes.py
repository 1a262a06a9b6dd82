"""How large the Bedrock answerer's requests are, for the cost estimate in docs/deploy.md (not a test).

Runs the local stack (hashing embedder: retrieval quality does not matter here, the size of the
evidence does), ingests the first passages of SQuAD 2.0 dev (English) and CMRC 2018 (Chinese)
grouped 20 to a Markdown document, asks their dev questions through `ask` (the /v1/kb/{kb}/ask
defaults: top_k 8, 4 parents as context) with the Bedrock answerer pointed at the loopback Bedrock
runtime, and reports the characters each Converse request carries (system prompt, question,
passages, the forced tool's schema) and estimated tokens: 1 per CJK character, 1 per 4 other
characters (Claude's and Nova's tokenizers give roughly this for English; no tokenizer is offline).

    PYTHONPATH=layers:. .venv/bin/python benchmarks/bedrock_prompt_sizes.py --passages 400 --questions 60
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
# Kana, CJK ideographs, Hangul, CJK punctuation and full-width forms.
CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u3000-\u303f\uff00-\uffef]"
)


def tokens(text: str) -> int:
    cjk = len(CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def request_text(body: dict[str, Any]) -> str:
    parts = [b.get("text", "") for b in body.get("system") or []]
    for message in body.get("messages") or []:
        parts += [b["text"] for b in message.get("content") or [] if "text" in b]
    if body.get("toolConfig"):
        parts.append(json.dumps(body["toolConfig"], separators=(",", ":")))
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, default=400)
    parser.add_argument("--questions", type=int, default=60)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bedrock-sizes-"))
    os.environ.update(
        {
            "RAG_DATA_ROOT": str(work),
            "RAG_API_TOKEN": "bench-token",
            "CITEGATE_EMBEDDER": "hashing",
            "CITEGATE_STAGE": "bench",
            "CITEGATE_IP_RATE_LIMIT": "1000000",
        }
    )
    from starlette.testclient import TestClient
    from tests.fakes.bedrock_server import ACCESS_KEY, SECRET_KEY, FakeBedrock

    from citegate.answers.ask import ask
    from citegate.answers.bedrock_converse import BedrockConverseAnswerer
    from citegate.clients.evaluation.dataset import read_jsonl
    from citegate.container import services
    from citegate.knowledge.retrieval import Scope
    from citegate.platform.settings import get_settings
    from citegate.runtime.gateway import create_app
    from citegate.runtime.stack import LocalStack

    stack = LocalStack(get_settings()).start()
    results: dict[str, dict[str, float]] = {}
    try:
        client = TestClient(create_app(), headers={"Authorization": "Bearer bench-token"})
        with FakeBedrock() as fake:
            os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = ACCESS_KEY, SECRET_KEY
            answerer = BedrockConverseAnswerer(
                model_id="anthropic.claude-3-5-haiku-20241022-v1:0", region="us-east-1", endpoint_url=fake.url
            )
            services().__dict__["answerer"] = answerer
            for name in ("squad2_dev", "cmrc2018"):
                corpus = read_jsonl(DATA / name / "corpus.jsonl")[: args.passages]
                kept = {row["id"] for row in corpus}
                gold = {}
                for line in (DATA / name / "qrels.tsv").read_text().splitlines()[1:]:
                    query, passage, _ = line.split("\t")
                    gold.setdefault(query, set()).add(passage)
                dev = read_jsonl(DATA / name / "dev.jsonl")
                questions = [q for q in dev if gold.get(q["id"], set()) & kept][: args.questions]
                kb = client.post("/v1/kb", json={"name": f"{name} {uuid.uuid4().hex[:6]}"}).json()["kb_id"]
                tasks = []
                for start in range(0, len(corpus), 20):
                    group = corpus[start : start + 20]
                    text = "\n\n".join(f"## {row['title']}\n\n{row['text']}" for row in group)
                    response = client.post(
                        f"/v1/kb/{kb}/documents",
                        json={"text": f"# {name} {start}\n\n{text}", "source_name": f"{name}-{start}.md"},
                    )
                    tasks.append(response.json()["task_id"])
                for task in tasks:
                    while client.get(f"/v1/tasks/{task}").json()["status"] not in ("succeeded", "failed"):
                        time.sleep(0.5)
                fake.calls.clear()
                for q in questions:
                    ask(services(), Scope(frozenset({kb})), q["text"])
                sizes = [request_text(c["body"]) for c in fake.calls if c["operation"] == "converse"]
                counted = [tokens(t) for t in sizes]
                results[name] = {
                    "questions": len(questions),
                    "calls": len(sizes),
                    "chars_p50": statistics.median(len(t) for t in sizes),
                    "tokens_p50": statistics.median(counted),
                    "tokens_mean": round(statistics.mean(counted), 1),
                    "tokens_p95": sorted(counted)[int(0.95 * (len(counted) - 1))],
                    "tokens_max": max(counted),
                }
                print(name, json.dumps(results[name]), flush=True)
    finally:
        stack.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
