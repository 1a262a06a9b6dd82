"""The OpenSearch engine: one index for every knowledge base, hybrid search through search pipelines.

Layout (all names derive from `prefix`):
    {prefix}-chunks              the index; document _id = ref_id, `kb_id` on every document
    {prefix}-chunks-template     composable index template with the same settings and mappings
    {prefix}-minmax-0.70         search pipeline: normalization-processor, min_max + arithmetic_mean,
                                 weights [lexical, dense] (OpenSearch 2.10+)
    {prefix}-rrf-60              search pipeline: score-ranker-processor, rrf (OpenSearch 2.19+)

Mapping choices, and why:
    text, title,   `citegate_english`: standard tokenizer, identifiers kept whole and split into
    context        their parts (`word_delimiter`, preserve_original: `os.path.join`, `work_mem`,
                   `getElementById`; an index created before keeps its analysis until it is
                   recreated), lowercase, Snowball English stemmer
                   (`porter2`, the stemmer tantivy uses in the embedded engine), no stopword filter
                   (the embedded index keeps stopwords too, so a stopword-only query still matches).
                   `context` is the chunk's parent text (`parent_contexts`), indexed, kept out of
                   `_source`; the lexical query sums the three fields with `LexicalFields` boosts.
    *.zh           Chinese words: the `smartcn` analyzer (analysis-smartcn plugin, available on
                   Amazon OpenSearch Service). Fallbacks when the plugin is missing: `icu`
                   (icu_tokenizer, analysis-icu plugin) or `cjk` (built in, CJK bigrams).
    path           keyword; `path_prefixes` are `prefix` queries on it: a plain, case-sensitive
                   string prefix, exactly `SearchFilter.admits` ("docs/gu" matches
                   "docs/guide/a.md"; "" matches every path). Prefix queries on keyword fields
                   need `search.allow_expensive_queries` (true by default).
    vector         knn_vector, method hnsw / engine faiss / space innerproduct: vectors are
                   L2-normalised, so inner product is cosine, and faiss supports innerproduct and
                   efficient filtering (the filter inside the `knn` clause) since 2.9.
    section        the chunk's section heading, analysed like the text, boosted by `heading` and
                   searched for the identifiers a query names (`identifier_forms`), as embedded.
    options        the chunk's command-line options, tokenized in Python exactly as the embedded
                   engine does (`analysis.flag_terms`), `whitespace` analyzer; a query naming an
                   option adds a `should` match on it, so `git shortlog -s` finds the entry of `-s`.
    other fields   keyword (exact-match filters), integers, heading stored but not indexed.

Scores: lexical is BM25; dense is turned back from OpenSearch's k-NN score (1 + ip for ip > 0,
1 / (1 - ip) otherwise) into the cosine, as the embedded engine reports it; hybrid is whatever the
pipeline computes (min_max fusion is shift-invariant, so it ranks like `fusion.min_max` whenever the
dense candidates have positive cosines). The pipeline's score is per query (min-max, even with the
lower/upper bounds of 2.17+, maps each query's best BM25 to the top), so it only ranks: the
pipeline query returns each hit's vector and the hit's cosine is computed here, from which
`citegate.knowledge.search.relevance` makes the absolute `score` exactly as for the embedded engine.
Two differences remain with the pipelines: each hybrid
sub-query keeps only `size` (= limit) hits per shard unless `pagination_depth=True` (2.19+) widens
that to `candidates`, and older neural-search releases average a document over the sub-queries that
returned it instead of counting a missing side as 0. With `fusion_pipelines=False` (or RRF on a
cluster without the score-ranker-processor, e.g. Serverless) both sides are fetched with one
`_msearch` and fused client-side with `citegate.knowledge.search.fusion`, exactly like the embedded engine.

Isolation: every query carries `terms kb_id` (built by `filter_clauses`, the only place filters are
translated), and every hit is checked again with `SearchFilter.admits` before it is returned.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import numpy as np
from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection, helpers
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import RequestError, TransportError
from opensearchpy.helpers.errors import BulkIndexError

from citegate.knowledge.search import fusion as fusion_lib
from citegate.knowledge.search.base import (
    ChunkRecord,
    FusionConfig,
    Hit,
    LexicalFields,
    SearchFilter,
    SearchMode,
    SearchResult,
    SearchUnavailable,
    Vector,
    parent_contexts,
)

log = logging.getLogger(__name__)

ChineseAnalyzer = Literal["smartcn", "icu", "cjk"]
Body = dict[str, Any]
# (source, score, lexical score, dense score) of one hit before it becomes a Hit.
_Ranked = list[tuple[Mapping[str, Any], float, float | None, float | None]]

DEFAULT_FUSION = FusionConfig()
DEFAULT_LEXICAL = LexicalFields()
ENGLISH_ANALYZER = "citegate_english"
ICU_ANALYZER = "citegate_icu"
CONTEXT_FIELD = "context"
# Command-line options of the text and title as the embedded engine tokenizes them (`flag_terms`:
# `-O` is `-^o`, `--[no-]verify` is `--verify --no-verify`): the standard tokenizer drops dashes,
# so "-s" would be the letter s. Lowercased in Python; OpenSearch's built-in `whitespace` analyzer
# only splits, so a field added to an older index needs no new analyzer (which would need a close).
OPTIONS_FIELD = "options"
# The chunk's section heading, analysed like the text (`heading` itself is stored, not indexed, in
# indexes created before it was searched; a mapping's field cannot start being indexed).
SECTION_FIELD = "section"
KEYWORD_FIELDS = (
    "ref_id",
    "kb_id",
    "tenant_id",
    "document_id",
    "parent_id",
    "source_name",
    "project",
    "version",
    "path",
    "url",
    "anchor",
)
# OpenSearch caps hybrid queries at 5 sub-queries and k-NN `k` at 10,000.
MAX_K = 10_000
# Amazon OpenSearch Service refuses HTTP payloads over 10 MiB on small instance types.
BULK_MAX_BYTES = 8 * 1024 * 1024
BULK_CHUNK_DOCS = 500
# Bulk requests refused with 429 (the cluster asks to slow down) are retried after 1 s, then 2 s.
BULK_RETRIES = 2
BULK_BACKOFF_S = 1
TEMPLATE_PRIORITY = 100
_PREFIX = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_WORD = re.compile(r"\w")


# ---------------------------------------------------------------------------------------- names


def index_name(prefix: str) -> str:
    return f"{prefix}-chunks"


def template_name(prefix: str) -> str:
    return f"{prefix}-chunks-template"


def _weight_label(weight: float) -> str:
    label = f"{weight:.2f}"
    if float(label) != round(weight, 6):  # keep distinct weights on distinct pipelines
        label = f"{weight:.6f}".rstrip("0")
    return label


def _validate_fusion(fusion: FusionConfig) -> None:
    if fusion.method == "min_max":
        if not 0.0 <= fusion.lexical_weight <= 1.0:
            raise ValueError("lexical_weight must be within [0, 1]")
    elif fusion.method == "rrf":
        if not 1 <= fusion.rank_constant <= 10_000:  # OpenSearch's accepted range
            raise ValueError("rank_constant must be within [1, 10000]")
    else:
        raise ValueError(f"unknown fusion method: {fusion.method!r}")


def pipeline_name(prefix: str, fusion: FusionConfig) -> str:
    """One search pipeline per fusion config: `{prefix}-minmax-0.70`, `{prefix}-rrf-60`."""
    _validate_fusion(fusion)
    if fusion.method == "rrf":
        return f"{prefix}-rrf-{fusion.rank_constant}"
    return f"{prefix}-minmax-{_weight_label(fusion.lexical_weight)}"


# ---------------------------------------------------------------------------------------- bodies


def _chinese_field(chinese_analyzer: ChineseAnalyzer) -> Body:
    analyzer = {"smartcn": "smartcn", "icu": ICU_ANALYZER, "cjk": "cjk"}[chinese_analyzer]
    return {"type": "text", "analyzer": analyzer}


def index_body(dimension: int, *, chinese_analyzer: ChineseAnalyzer = "smartcn") -> Body:
    """Settings and mappings of the chunks index (what the template applies, and what create sends)."""
    if dimension < 1:
        raise ValueError("dimension must be positive")
    analyzers: Body = {
        ENGLISH_ANALYZER: {
            "type": "custom",
            "tokenizer": "standard",
            "filter": ["citegate_identifiers", "lowercase", "citegate_english_stemmer"],
        }
    }
    if chinese_analyzer == "icu":
        analyzers[ICU_ANALYZER] = {"type": "custom", "tokenizer": "icu_tokenizer", "filter": ["lowercase"]}
    analysed = {
        "type": "text",
        "analyzer": ENGLISH_ANALYZER,
        "fields": {"zh": _chinese_field(chinese_analyzer)},
    }
    properties: Body = {name: {"type": "keyword"} for name in KEYWORD_FIELDS}
    properties.update(
        {
            "text": analysed,
            "title": analysed,
            CONTEXT_FIELD: analysed,
            OPTIONS_FIELD: {"type": "text", "analyzer": "whitespace"},
            SECTION_FIELD: analysed,
            "heading": {"type": "text", "index": False},
            "position": {"type": "integer"},
            "page": {"type": "integer"},
            "vector": {
                "type": "knn_vector",
                "dimension": dimension,
                "method": {
                    "name": "hnsw",
                    "engine": "faiss",
                    "space_type": "innerproduct",
                    "parameters": {"m": 16, "ef_construction": 128},
                },
            },
        }
    )
    return {
        "settings": {
            "index.knn": True,
            "analysis": {
                "filter": {
                    "citegate_english_stemmer": {"type": "stemmer", "language": "porter2"},
                    # Identifiers whole and by their parts, as the embedded engine indexes them
                    # (citegate.knowledge.search.analysis.identifier_terms): os.path.join, work_mem, fooBar.
                    "citegate_identifiers": {
                        "type": "word_delimiter",
                        "preserve_original": True,
                        "split_on_case_change": True,
                        "split_on_numerics": False,
                        "stem_english_possessive": False,
                    },
                },
                "analyzer": analyzers,
            },
        },
        # strict: a misspelt field is an indexing error, not a silently unsearchable one
        # the parent text is only searched: returning it with every hit would multiply the payload
        "mappings": {
            "dynamic": "strict",
            "_source": {"excludes": [CONTEXT_FIELD, OPTIONS_FIELD, SECTION_FIELD]},
            "properties": properties,
        },
    }


def index_template_body(
    dimension: int, *, prefix: str = "citegate", chinese_analyzer: ChineseAnalyzer = "smartcn"
) -> Body:
    """The composable index template for `{prefix}-chunks` (exact pattern: prefixes never overlap)."""
    return {
        "index_patterns": [index_name(prefix)],
        "priority": TEMPLATE_PRIORITY,
        "template": index_body(dimension, chinese_analyzer=chinese_analyzer),
        "_meta": {"managed_by": "citegate"},
    }


def search_pipeline_body(fusion: FusionConfig) -> Body:
    """The search pipeline that fuses the hybrid sub-queries [lexical, dense] as `fusion` says."""
    _validate_fusion(fusion)
    if fusion.method == "rrf":
        return {
            "description": f"citegate hybrid fusion: rrf, rank_constant {fusion.rank_constant}",
            "phase_results_processors": [
                {
                    "score-ranker-processor": {
                        "combination": {"technique": "rrf", "rank_constant": fusion.rank_constant}
                    }
                }
            ],
        }
    # Rounded so the sum is 1.0 within OpenSearch's tolerance and the name matches the body.
    lexical = round(fusion.lexical_weight, 6)
    dense = round(1.0 - fusion.lexical_weight, 6)
    return {
        "description": f"citegate hybrid fusion: min_max + arithmetic_mean, weights [{lexical}, {dense}]",
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": "min_max"},
                    "combination": {
                        "technique": "arithmetic_mean",
                        "parameters": {"weights": [lexical, dense]},
                    },
                }
            }
        ],
    }


def filter_clauses(flt: SearchFilter) -> list[Body]:
    """The one translation of a SearchFilter into OpenSearch filter clauses (kb_id always first)."""
    clauses: list[Body] = [{"terms": {"kb_id": sorted(flt.kb_ids)}}]
    for name, values in (
        ("source_name", flt.source_names),
        ("project", flt.projects),
        ("version", flt.versions),
    ):
        if values is not None:
            # An empty set admits nothing, and `terms` with no values matches nothing: same meaning.
            clauses.append({"terms": {name: sorted(values)}})
    if flt.path_prefixes is not None:
        prefixes = list(dict.fromkeys(flt.path_prefixes))
        if not prefixes:
            clauses.append({"match_none": {}})  # an empty bool would match everything
        elif "" not in prefixes:  # "" admits every path: no clause needed
            clauses.append(
                {
                    "bool": {
                        "should": [{"prefix": {"path": {"value": prefix}}} for prefix in prefixes],
                        "minimum_should_match": 1,
                    }
                }
            )
    return clauses


def _vector_list(vector: Vector) -> list[float]:
    return [float(x) for x in np.asarray(vector, dtype=np.float32).reshape(-1)]


def _boosted(name: str, boost: float) -> str:
    return name if boost == 1.0 else f"{name}^{boost:g}"


def lexical_fields(lexical: LexicalFields = DEFAULT_LEXICAL) -> list[str]:
    """The multi_match fields: each lexical field and its Chinese sub-field, with its boost."""
    boosts = (("text", lexical.text), ("title", lexical.title), (CONTEXT_FIELD, lexical.context))
    return [_boosted(f, boost) for name, boost in boosts if boost > 0 for f in (name, f"{name}.zh")]


def lexical_clause(query: str, flt: SearchFilter, lexical: LexicalFields = DEFAULT_LEXICAL) -> Body:
    from citegate.knowledge.search.analysis import (  # tantivy's analyzer: loaded on first query
        flag_terms,
        heading_identifier_forms,
        query_text,
    )

    # most_fields sums the fields, like the embedded engine (text + 0.5 * title + context); the .zh
    # sub-fields are the same text analysed another way, which is what most_fields is for.
    clause: Body = {
        "must": [
            {
                "multi_match": {
                    "query": query_text(query),
                    "type": "most_fields",
                    "fields": lexical_fields(lexical),
                }
            }
        ],
        "filter": filter_clauses(flt),
    }
    should: list[Body] = []
    options = list(dict.fromkeys(flag_terms(query)))
    if options:  # scored like a word of the text, as in the embedded engine
        should.append({"match": {OPTIONS_FIELD: {"query": " ".join(options), "boost": lexical.text}}})
    names = [form for form in heading_identifier_forms(query) if not form.startswith("-")]
    if names and lexical.heading > 0:  # headings are searched for identifiers only, as embedded
        should.append({"match": {SECTION_FIELD: {"query": " ".join(names), "boost": lexical.heading}}})
    if should:
        clause["should"] = should
    return {"bool": clause}


def knn_clause(vector: Vector, flt: SearchFilter, k: int) -> Body:
    # The filter inside the knn clause is efficient filtering: the graph search itself only
    # considers admitted documents, so k results come back even when the filter is selective.
    return {
        "knn": {
            "vector": {
                "vector": _vector_list(vector),
                "k": min(k, MAX_K),
                "filter": {"bool": {"filter": filter_clauses(flt)}},
            }
        }
    }


# `context` is excluded by the mapping of indexes created since it exists; older ones still store it.
_SOURCE = {"excludes": ["vector", CONTEXT_FIELD, OPTIONS_FIELD, SECTION_FIELD]}


def lexical_query_body(
    query: str, flt: SearchFilter, limit: int, lexical: LexicalFields = DEFAULT_LEXICAL
) -> Body:
    return {"size": limit, "query": lexical_clause(query, flt, lexical), "_source": dict(_SOURCE)}


def dense_query_body(vector: Vector, flt: SearchFilter, limit: int, k: int | None = None) -> Body:
    return {"size": limit, "query": knn_clause(vector, flt, k or limit), "_source": dict(_SOURCE)}


def hybrid_query_body(
    query: str,
    vector: Vector,
    flt: SearchFilter,
    limit: int,
    candidates: int,
    *,
    pagination_depth: int | None = None,
    lexical: LexicalFields = DEFAULT_LEXICAL,
    with_vector: bool = False,
) -> Body:
    """A `hybrid` query: [lexical, dense], fused by the search pipeline named in the request.

    Each sub-query keeps `from + size` hits per shard unless `pagination_depth` (OpenSearch 2.19+)
    widens that pool; the k-NN side asks for `candidates` neighbours. `with_vector` returns each
    hit's vector: the pipeline's score is per-query, so the cosine is computed from it (relevance.py).
    """
    hybrid: Body = {"queries": [lexical_clause(query, flt, lexical), knn_clause(vector, flt, candidates)]}
    if pagination_depth is not None:
        hybrid["pagination_depth"] = min(pagination_depth, MAX_K)
    source = {"excludes": [CONTEXT_FIELD, OPTIONS_FIELD, SECTION_FIELD]} if with_vector else dict(_SOURCE)
    return {"size": limit, "query": {"hybrid": hybrid}, "_source": source}


def document_query(kb_id: str, document_id: str, keep: Sequence[str] = ()) -> Body:
    """Every chunk of one document, except the ref_ids in `keep` (the ones just written)."""
    query: Body = {"bool": {"filter": [{"term": {"kb_id": kb_id}}, {"term": {"document_id": document_id}}]}}
    if keep:
        query["bool"]["must_not"] = [{"ids": {"values": list(keep)}}]
    return {"query": query}


def chunk_options(chunk: ChunkRecord) -> str:
    from citegate.knowledge.search.analysis import flag_terms

    return " ".join(
        dict.fromkeys(flag_terms(chunk.title) + flag_terms(chunk.heading) + flag_terms(chunk.text))
    )


def chunk_source(chunk: ChunkRecord, vector: Vector, context: str) -> Body:
    return {
        "ref_id": chunk.ref_id,
        "kb_id": chunk.kb_id,
        "tenant_id": chunk.tenant_id,
        "document_id": chunk.document_id,
        "parent_id": chunk.parent_id,
        "source_name": chunk.source_name,
        "text": chunk.text,
        "position": chunk.position,
        "title": chunk.title,
        "page": chunk.page,
        "project": chunk.project,
        "path": chunk.path,
        "version": chunk.version,
        "url": chunk.url,
        "anchor": chunk.anchor,
        "heading": chunk.heading,
        CONTEXT_FIELD: context,
        OPTIONS_FIELD: chunk_options(chunk),
        SECTION_FIELD: chunk.heading,
        "vector": _vector_list(vector),
    }


def bulk_actions(index: str, chunks: Sequence[ChunkRecord], vectors: Sequence[Vector]) -> list[Body]:
    """helpers.bulk actions: `index` (create or overwrite) with _id = ref_id.

    `chunks` are all the chunks of one document: each one's parent text is rebuilt from them."""
    contexts = parent_contexts(chunks)
    return [
        {
            "_op_type": "index",
            "_index": index,
            "_id": chunk.ref_id,
            "_source": chunk_source(chunk, vector, contexts[chunk.ref_id]),
        }
        for chunk, vector in zip(chunks, vectors, strict=True)
    ]


def chunk_from_source(source: Mapping[str, Any]) -> ChunkRecord:
    page = source.get("page")
    return ChunkRecord(
        ref_id=str(source.get("ref_id", "")),
        kb_id=str(source.get("kb_id", "")),
        tenant_id=str(source.get("tenant_id", "")),
        document_id=str(source.get("document_id", "")),
        parent_id=str(source.get("parent_id", "")),
        source_name=str(source.get("source_name", "")),
        text=str(source.get("text", "")),
        position=int(source.get("position") or 0),
        title=str(source.get("title", "")),
        page=None if page is None else int(page),
        project=str(source.get("project", "")),
        path=str(source.get("path", "")),
        version=str(source.get("version", "")),
        url=str(source.get("url", "")),
        anchor=str(source.get("anchor", "")),
        heading=str(source.get("heading", "")),
    )


def _cosine(source: Mapping[str, Any], vector: Vector) -> float | None:
    """The hit's cosine with the query from its stored vector (None when the source has none)."""
    stored = source.get("vector")
    if not isinstance(stored, list) or len(stored) != len(vector):
        return None
    return float(np.dot(np.asarray(stored, dtype=np.float32), vector))


def knn_score_to_cosine(score: float) -> float:
    """Invert OpenSearch's innerproduct score (1 + ip when ip > 0, else 1 / (1 - ip))."""
    if score >= 1.0:
        return score - 1.0
    if score <= 0.0:
        return -1.0
    return 1.0 - 1.0 / score


# ---------------------------------------------------------------------------------------- errors


def _retryable(status: object) -> bool:
    return isinstance(status, int) and (status >= 500 or status == 429)


@contextmanager
def _guard(action: str) -> Iterator[None]:
    """Map "the cluster cannot answer" to SearchUnavailable; request errors (4xx) stay as they are."""
    try:
        yield
    except OpenSearchConnectionError as exc:  # includes ConnectionTimeout and SSLError
        raise SearchUnavailable(f"OpenSearch unreachable during {action}: {exc}") from exc
    except BulkIndexError as exc:
        raise SearchUnavailable(f"OpenSearch {action} failed: {_first_bulk_reason(exc)}") from exc
    except TransportError as exc:
        if _retryable(exc.status_code):
            raise SearchUnavailable(f"OpenSearch {action} failed: {exc}") from exc
        raise


def _first_bulk_reason(exc: BulkIndexError) -> str:
    errors = exc.errors
    count = len(errors)
    if not errors:
        return str(exc)
    (op, item), *_ = dict(errors[0]).items()
    error = item.get("error") if isinstance(item, dict) else None
    if isinstance(error, dict):
        reason = f"{error.get('type', 'error')}: {error.get('reason', '')}"
    else:
        reason = str(error)
    ref = item.get("_id", "?") if isinstance(item, dict) else "?"
    status = item.get("status", "?") if isinstance(item, dict) else "?"
    return f"{count} chunk(s) failed; first: {op} {ref} status {status}: {reason}"


def _raise_item_error(item: Mapping[str, Any], action: str) -> None:
    """An `_msearch` response item carries its own error instead of raising."""
    error = item.get("error")
    if error is None:
        return
    status = item.get("status", 500)
    reason = error.get("reason", error) if isinstance(error, dict) else error
    if _retryable(status):
        raise SearchUnavailable(f"OpenSearch {action} failed: {status} {reason}")
    raise RequestError(status, str(reason), dict(item))


# ---------------------------------------------------------------------------------------- engine


class OpenSearchIndex:
    """SearchIndex on OpenSearch (self-managed 2.10+, Amazon OpenSearch Service; see the module doc).

    The constructor does no network I/O. With `auto_setup` (the default) the first operation of a
    process puts the template and creates the index if needed, and the first hybrid search with a
    given fusion config puts its pipeline; deployments that forbid that call `setup_opensearch` at
    deploy time and pass `auto_setup=False`.
    """

    engine = "opensearch"

    def __init__(
        self,
        client: Any,
        *,
        prefix: str,
        dimension: int,
        fusion_pipelines: bool = True,
        rrf_pipeline: bool = True,
        pagination_depth: bool = False,
        auto_setup: bool = True,
        chinese_analyzer: ChineseAnalyzer = "smartcn",
        owns_client: bool = False,
        lexical: LexicalFields = DEFAULT_LEXICAL,
    ) -> None:
        """`fusion_pipelines=False` fuses client-side; `rrf_pipeline=False` only for RRF (Serverless
        has no score-ranker-processor); `pagination_depth=True` (2.19+) makes each hybrid sub-query
        keep `candidates` hits per shard instead of `limit`; `lexical` weighs the BM25 fields."""
        if not _PREFIX.match(prefix):
            raise ValueError(f"invalid OpenSearch index prefix: {prefix!r}")
        if dimension < 1:
            raise ValueError("dimension must be positive")
        self._client = client
        self.prefix = prefix
        self.dimension = dimension
        self.index_name = index_name(prefix)
        self.fusion_pipelines = fusion_pipelines
        self.rrf_pipeline = rrf_pipeline
        self.pagination_depth = pagination_depth
        self.auto_setup = auto_setup
        self.chinese_analyzer: ChineseAnalyzer = chinese_analyzer
        self.lexical = lexical
        self._owns_client = owns_client
        self._lock = threading.Lock()
        self._setup_done = False
        self._pipelines: set[str] = set()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str,
        dimension: int,
        timeout: float = 10.0,
        verify_certs: bool = True,
        client_options: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> OpenSearchIndex:
        """`http(s)://[user:password@]host[:port][/path]`; basic auth from the URL's userinfo."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("OPENSEARCH_URL must look like https://user:password@host:port")
        https = parts.scheme == "https"
        host: dict[str, Any] = {"host": parts.hostname, "port": parts.port or (443 if https else 9200)}
        if parts.path not in ("", "/"):
            host["url_prefix"] = parts.path
        auth = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
        client = OpenSearch(
            hosts=[host],
            http_auth=auth,
            use_ssl=https,
            verify_certs=verify_certs and https,
            ssl_show_warn=verify_certs,
            http_compress=True,
            timeout=timeout,
            **dict(client_options or {}),
        )
        return cls(client, prefix=prefix, dimension=dimension, owns_client=True, **kw)

    @classmethod
    def from_aws(
        cls,
        host: str,
        region: str,
        *,
        prefix: str,
        dimension: int,
        service: Literal["es", "aoss"] = "es",
        credentials: Any = None,
        timeout: float = 10.0,
        client_options: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> OpenSearchIndex:
        """Amazon OpenSearch Service ("es") or Serverless ("aoss"), requests signed with SigV4."""
        if credentials is None:
            import boto3

            credentials = boto3.Session().get_credentials()
            if credentials is None:
                raise ValueError("no AWS credentials found for OpenSearch request signing")
        hostname = urlsplit(host if "://" in host else f"https://{host}").hostname
        if not hostname:
            raise ValueError(f"invalid OpenSearch host: {host!r}")
        client = OpenSearch(
            hosts=[{"host": hostname, "port": 443}],
            http_auth=AWSV4SignerAuth(credentials, region, service),
            use_ssl=True,
            verify_certs=True,
            connection_class=RequestsHttpConnection,  # AWSV4SignerAuth is a requests auth
            http_compress=True,
            timeout=timeout,
            **dict(client_options or {}),
        )
        if service == "aoss":
            kw.setdefault("rrf_pipeline", False)  # Serverless has no score-ranker-processor
        return cls(client, prefix=prefix, dimension=dimension, owns_client=True, **kw)

    @property
    def client(self) -> Any:
        return self._client

    # ------------------------------------------------------------------ setup

    def ensure_setup(self, fusions: Sequence[FusionConfig] = (DEFAULT_FUSION,)) -> dict[str, Any]:
        """Put the template, create the index if missing (checking its vector dimension otherwise)
        and put one search pipeline per fusion config. Idempotent: safe on every deploy."""
        client = self._client
        template = template_name(self.prefix)
        with _guard("setup"):
            client.indices.put_index_template(
                name=template,
                body=index_template_body(
                    self.dimension, prefix=self.prefix, chinese_analyzer=self.chinese_analyzer
                ),
            )
            created = False
            if client.indices.exists(index=self.index_name):
                self._check_dimension()
            else:
                try:
                    client.indices.create(
                        index=self.index_name,
                        body=index_body(self.dimension, chinese_analyzer=self.chinese_analyzer),
                    )
                    created = True
                except RequestError as exc:
                    if exc.error != "resource_already_exists_exception":  # lost a race: fine
                        raise
                    self._check_dimension()
        pipelines = [self._put_pipeline(fusion) for fusion in fusions]
        self._setup_done = True
        return {"index": self.index_name, "created": created, "template": template, "pipelines": pipelines}

    def _check_dimension(self) -> None:
        """Refuse an index of another vector dimension; add fields that an older mapping lacks."""
        mappings = self._client.indices.get_mapping(index=self.index_name)
        missing: Body = {}
        for found in mappings.values():  # keyed by the concrete index (the name may be an alias)
            properties = found.get("mappings", {}).get("properties", {})
            vector = properties.get("vector", {})
            if vector.get("dimension") != self.dimension:
                raise ValueError(
                    f"{self.index_name} holds {vector.get('dimension')}-dimensional vectors, "
                    f"not {self.dimension}: use another prefix per embedding model"
                )
            wanted = index_body(self.dimension, chinese_analyzer=self.chinese_analyzer)
            for name in (CONTEXT_FIELD, OPTIONS_FIELD, SECTION_FIELD):
                if name not in properties:
                    missing[name] = wanted["mappings"]["properties"][name]
        if missing:
            # Adding a field is allowed on a live index; chunks indexed before it score without it
            # until their documents are ingested again.
            self._client.indices.put_mapping(index=self.index_name, body={"properties": missing})

    def _put_pipeline(self, fusion: FusionConfig) -> str:
        name = pipeline_name(self.prefix, fusion)
        with _guard("pipeline setup"):
            self._client.search_pipeline.put(id=name, body=search_pipeline_body(fusion))
        self._pipelines.add(name)
        return name

    def _ready(self) -> None:
        if self.auto_setup and not self._setup_done:
            with self._lock:
                if not self._setup_done:
                    self.ensure_setup(fusions=())

    def _pipeline(self, fusion: FusionConfig) -> str:
        name = pipeline_name(self.prefix, fusion)
        if self.auto_setup and name not in self._pipelines:
            with self._lock:
                if name not in self._pipelines:
                    self._put_pipeline(fusion)
        return name

    # ------------------------------------------------------------------ writes

    def _prepare(self, kb_id: str, document_id: str, chunks: Sequence[ChunkRecord]) -> list[Vector]:
        vectors: list[Vector] = []
        for chunk in chunks:
            if chunk.kb_id != kb_id or chunk.document_id != document_id:
                raise ValueError(f"chunk {chunk.ref_id!r} does not belong to document {kb_id}/{document_id}")
            if chunk.vector is None:
                raise ValueError(f"chunk {chunk.ref_id!r} has no vector")
            vector = np.asarray(chunk.vector, dtype=np.float32).reshape(-1)
            if vector.shape != (self.dimension,):
                raise ValueError(f"chunk {chunk.ref_id!r} has {vector.size} dimensions, not {self.dimension}")
            if not np.isfinite(vector).all():
                raise ValueError(f"chunk {chunk.ref_id!r} has a non-finite vector")
            if chunk.page is not None and chunk.page < 0:
                raise ValueError(f"chunk {chunk.ref_id!r} has a negative page")
            if not chunk.ref_id:
                raise ValueError("a chunk needs a ref_id")
            vectors.append(vector)
        if len({chunk.ref_id for chunk in chunks}) != len(chunks):
            raise ValueError(f"document {kb_id}/{document_id} repeats a ref_id")
        return vectors

    def _check_owners(self, kb_id: str, document_id: str, ref_ids: Sequence[str]) -> None:
        """Refuse a ref_id indexed under another document: with _id = ref_id, indexing it would
        overwrite (and so move) another document's, possibly another knowledge base's, chunk."""
        with _guard("upsert"):
            found = self._client.mget(
                index=self.index_name, body={"ids": list(ref_ids)}, _source_includes="kb_id,document_id"
            )
        for doc in found.get("docs", []):
            if not doc.get("found"):
                continue
            source = doc.get("_source") or {}
            owner = (source.get("kb_id"), source.get("document_id"))
            if owner != (kb_id, document_id):
                raise ValueError(f"ref_id {doc.get('_id')!r} is already in {owner[0]}/{owner[1]}")

    def upsert_document(self, kb_id: str, document_id: str, chunks: Sequence[ChunkRecord]) -> None:
        """Replace every chunk of one document.

        Order: index the new chunks (same _id overwrites), then delete the document's chunks that
        are not among them. The document is never absent from search in between, and a failure
        leaves old and new chunks side by side (retrying the upsert repairs it), never nothing.
        """
        vectors = self._prepare(kb_id, document_id, chunks)
        self._ready()
        ref_ids = [chunk.ref_id for chunk in chunks]
        if ref_ids:
            self._check_owners(kb_id, document_id, ref_ids)
            with _guard("upsert"):
                helpers.bulk(
                    self._client,
                    bulk_actions(self.index_name, chunks, vectors),
                    refresh="wait_for",
                    chunk_size=BULK_CHUNK_DOCS,
                    max_chunk_bytes=BULK_MAX_BYTES,
                    max_retries=BULK_RETRIES,
                    initial_backoff=BULK_BACKOFF_S,
                )
        self._delete(document_query(kb_id, document_id, keep=ref_ids), "upsert")

    def _delete(self, body: Body, action: str) -> int:
        with _guard(action):
            response = self._client.delete_by_query(index=self.index_name, body=body, refresh=True)
        failures = response.get("failures") or []
        if failures:
            first = failures[0]
            cause = first.get("cause", first) if isinstance(first, dict) else first
            raise SearchUnavailable(f"OpenSearch {action} left {len(failures)} chunk(s) undeleted: {cause}")
        return int(response.get("deleted", 0))

    def delete_document(self, kb_id: str, document_id: str) -> int:
        self._ready()
        return self._delete(document_query(kb_id, document_id), "delete_document")

    def delete_kb(self, kb_id: str) -> None:
        self._ready()
        self._delete({"query": {"bool": {"filter": [{"term": {"kb_id": kb_id}}]}}}, "delete_kb")

    # ------------------------------------------------------------------ reads

    def get_chunks(self, ref_ids: Sequence[str]) -> dict[str, ChunkRecord]:
        wanted = list(dict.fromkeys(ref_ids))
        if not wanted:
            return {}
        self._ready()
        with _guard("get_chunks"):
            found = self._client.mget(index=self.index_name, body={"ids": wanted}, _source_excludes="vector")
        chunks = (chunk_from_source(doc["_source"]) for doc in found.get("docs", []) if doc.get("found"))
        return {chunk.ref_id: chunk for chunk in chunks}

    def document_chunks(self, kb_id: str, document_id: str, limit: int) -> list[ChunkRecord]:
        self._ready()
        body: Body = {
            **document_query(kb_id, document_id),
            "sort": [{"position": "asc"}],
            "size": max(limit, 1),
            "_source": dict(_SOURCE),
        }
        found = self._search(body, "document_chunks")
        return [chunk_from_source(hit["_source"]) for hit in found.get("hits", {}).get("hits", [])]

    def count(self, kb_id: str | None = None, document_id: str | None = None) -> int:
        self._ready()
        clauses = [
            {"term": {name: value}}
            for name, value in (("kb_id", kb_id), ("document_id", document_id))
            if value is not None
        ]
        query: Body = {"bool": {"filter": clauses}} if clauses else {"match_all": {}}
        with _guard("count"):
            response = self._client.count(index=self.index_name, body={"query": query})
        return int(response.get("count", 0))

    def _uses_pipeline(self, fusion: FusionConfig) -> bool:
        return self.fusion_pipelines and (fusion.method != "rrf" or self.rrf_pipeline)

    def search(
        self,
        *,
        query: str,
        vector: Vector | None,
        filter: SearchFilter,
        limit: int,
        mode: SearchMode = "hybrid",
        fusion: FusionConfig = DEFAULT_FUSION,
        candidates: int | None = None,
    ) -> SearchResult:
        """Ranked chunks admitted by `filter`; the same mode fallbacks as the embedded engine.

        hybrid: with no searchable text it runs dense, with no vector lexical (stats["mode"] is the
        mode that ran); each side takes `max(candidates, limit)` candidates (default
        `max(limit * 5, 50)`). lexical / dense: that side alone, BM25 / cosine scores.
        """
        if mode not in ("hybrid", "lexical", "dense"):
            raise ValueError(f"unknown search mode: {mode!r}")
        query_vector: Vector | None = None
        if vector is not None:
            query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
            if query_vector.shape != (self.dimension,):
                raise ValueError(f"query vector has {query_vector.size} dimensions, not {self.dimension}")
            if not np.isfinite(query_vector).all():
                raise ValueError("query vector is not finite")
        if mode == "dense" and query_vector is None:
            raise ValueError("a dense search needs a query vector")
        has_text = mode != "dense" and bool(_WORD.search(query))
        effective: str = mode
        if mode == "hybrid":
            if query_vector is None:
                effective = "lexical"
            elif not has_text:
                effective = "dense"
        if effective == "hybrid":
            _validate_fusion(fusion)
        stats: dict[str, object] = {
            "engine": self.engine,
            "mode": effective,
            "requested_mode": mode,
            "pipeline": None,
            "took_ms": 0,
        }
        timings = {"search": 0.0}
        stats["timings_ms"] = timings
        if limit <= 0 or (effective == "lexical" and not has_text):
            return SearchResult([], stats)
        pool = max(candidates or max(limit * 5, 50), limit)
        self._ready()

        started = time.perf_counter()
        hits: _Ranked
        if effective == "hybrid" and self._uses_pipeline(fusion):
            hits = self._hybrid_pipeline(query, query_vector, filter, limit, pool, fusion, stats)
        elif effective == "hybrid":
            hits = self._hybrid_client(query, query_vector, filter, limit, pool, fusion, stats)
        elif effective == "lexical":
            response = self._search(lexical_query_body(query, filter, limit, self.lexical), "lexical search")
            stats["took_ms"] = response.get("took", 0)
            hits = [(source, score, score, None) for source, score in _ranked_sources(response)]
        else:
            assert query_vector is not None
            response = self._search(dense_query_body(query_vector, filter, limit), "dense search")
            stats["took_ms"] = response.get("took", 0)
            hits = [
                (source, cosine, None, cosine)
                for source, score in _ranked_sources(response)
                for cosine in (knn_score_to_cosine(score),)
            ]
        timings["search"] = (time.perf_counter() - started) * 1000

        result: list[Hit] = []
        seen: set[str] = set()
        for source, score, lexical, dense in hits:
            chunk = chunk_from_source(source)
            if chunk.ref_id in seen:
                continue
            seen.add(chunk.ref_id)
            if not filter.admits(chunk):  # isolation must hold even against a misconfigured cluster
                log.error("OpenSearch returned chunk %s outside its filter; dropped", chunk.ref_id)
                continue
            result.append(Hit(chunk, score, lexical, dense))
        return SearchResult(result[:limit], stats)

    def _search(self, body: Body, action: str, **params: Any) -> Any:
        with _guard(action):
            return self._client.search(index=self.index_name, body=body, **params)

    def _hybrid_pipeline(
        self,
        query: str,
        vector: Vector | None,
        flt: SearchFilter,
        limit: int,
        pool: int,
        fusion: FusionConfig,
        stats: dict[str, object],
    ) -> _Ranked:
        assert vector is not None
        name = self._pipeline(fusion)
        body = hybrid_query_body(
            query,
            vector,
            flt,
            limit,
            pool,
            pagination_depth=pool if self.pagination_depth else None,
            lexical=self.lexical,
            with_vector=True,
        )
        response = self._search(body, "hybrid search", search_pipeline=name)
        stats.update(pipeline=name, fusion="pipeline", took_ms=response.get("took", 0))
        # Ties in OpenSearch go by Lucene doc id; re-sort with fusion.py's key (ref_id) instead.
        ranked = sorted(
            _ranked_sources(response), key=lambda item: (-item[1], str(item[0].get("ref_id", "")))
        )
        # The pipeline's min-max score is relative to the query's best hits; the cosine (from each
        # hit's vector) is what citegate.knowledge.search.relevance turns into an absolute score.
        return [(source, score, None, _cosine(source, vector)) for source, score in ranked]

    def _hybrid_client(
        self,
        query: str,
        vector: Vector | None,
        flt: SearchFilter,
        limit: int,
        pool: int,
        fusion: FusionConfig,
        stats: dict[str, object],
    ) -> _Ranked:
        """Both sides in one `_msearch`, fused here with fusion.py: identical to the embedded engine."""
        assert vector is not None
        with _guard("hybrid search"):
            response = self._client.msearch(
                index=self.index_name,
                body=[
                    {},
                    lexical_query_body(query, flt, pool, self.lexical),
                    {},
                    dense_query_body(vector, flt, pool, pool),
                ],
            )
        items = response.get("responses", [])
        if len(items) != 2:
            raise SearchUnavailable(f"OpenSearch _msearch answered {len(items)} responses, not 2")
        for item in items:
            _raise_item_error(item, "hybrid search")
        sources: dict[str, Mapping[str, Any]] = {}
        sides: list[list[tuple[str, float]]] = []
        for item, dense in zip(items, (False, True), strict=True):
            side = []
            for source, score in _ranked_sources(item):
                ref_id = str(source.get("ref_id", ""))
                sources.setdefault(ref_id, source)
                side.append((ref_id, knn_score_to_cosine(score) if dense else score))
            sides.append(side)
        lexical, dense_side = sides
        stats.update(
            fusion="client",
            lexical_candidates=len(lexical),
            dense_candidates=len(dense_side),
            dense_floor=min((score for _, score in dense_side), default=None),
            took_ms=max((int(item.get("took", 0)) for item in items), default=0),
        )
        fused = fusion_lib.fuse(lexical, dense_side, fusion)[:limit]
        return [(sources[f.ref_id], f.score, f.lexical, f.dense) for f in fused]

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the HTTP connections of a client this index built (never a caller's client)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> OpenSearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ranked_sources(response: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], float]]:
    hits = response.get("hits", {}).get("hits", [])
    ranked = []
    for hit in hits:
        score = hit.get("_score")
        source = hit.get("_source")
        if source is None or score is None or not math.isfinite(float(score)):
            continue
        ranked.append((source, float(score)))
    return ranked


def setup_opensearch(
    client: Any,
    prefix: str,
    dimension: int,
    fusions: Sequence[FusionConfig] = (DEFAULT_FUSION,),
    *,
    chinese_analyzer: ChineseAnalyzer = "smartcn",
) -> dict[str, Any]:
    """Deploy-time setup (the CDK custom resource): template, index and pipelines, idempotently."""
    index = OpenSearchIndex(client, prefix=prefix, dimension=dimension, chinese_analyzer=chinese_analyzer)
    return index.ensure_setup(fusions)


__all__ = [
    "OpenSearchIndex",
    "bulk_actions",
    "chunk_from_source",
    "dense_query_body",
    "document_query",
    "filter_clauses",
    "hybrid_query_body",
    "index_body",
    "index_name",
    "index_template_body",
    "knn_score_to_cosine",
    "lexical_query_body",
    "pipeline_name",
    "search_pipeline_body",
    "setup_opensearch",
    "template_name",
]
