"""RAG on a model that copies: how often SmolLM2-135M-Instruct answers with the retrieved fact.

Twenty-two short documents, each one invented fact ("The lighthouse of
Varnholm was painted green in 1911."), and one question per fact whose answer is a word or
number found only in its document. Three pipelines answer every question, each with the
framework's default prompts:

* ``query``: LlamaIndex ``VectorStoreIndex(...).as_query_engine(llm=MFSLLM)`` (compact
  response mode, the chat text-QA template, ``similarity_top_k=2``);
* ``chat``: ``VectorStoreIndex(...).as_chat_engine(llm=MFSLLM)`` (the condense-plus-context
  engine; a fresh conversation per question, so the condense step is skipped);
* ``langchain``: ``retriever | prompt | ChatMFS | StrOutputParser`` with an in-memory vector
  store (``k=2``) and a plain "answer from the context" prompt.

Retrieval is offline: a hashing bag of words (scikit-learn's ``HashingVectorizer``, 1,024
features, L2-normalised) embeds documents and questions, as
``tests/integration/test_llamaindex_default_engines.py`` does. A *hit* is an answer that
contains the expected word (case-insensitive); ``retrieved`` counts questions whose own
document is among the retrieved ones, so an answer miss can be told from a retrieval miss.
The hit counts are reported whatever they are: they measure a 135M model, not the library.

The MFS settings default to a small search (M = 2 beams, N = 2 rollouts, at most 2 steps of
32 tokens, 48-token rollouts, seed 0) and an empty assistant prefix: the engine's default
prefix, the φ-Decoding release's "The reasoning steps are:", makes SmolLM2 list the context
back line by line until the token cap (``--assistant-prefix`` restores it).

Usage::

    python experiments/benchmarks/smollm2_rag.py --methods cot,mfs --out bench-results/smollm2-rag.json

The builders (:func:`build_index`, :func:`build_query_engine`, :func:`build_chain`, ...) are
what ``tests/smollm2/test_smollm2_rag.py`` runs, on a few questions.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FACTS",
    "Fact",
    "PIPELINES",
    "build_chain",
    "build_chat_engine",
    "build_index",
    "build_query_engine",
    "build_retriever",
    "hashing_vector",
    "is_hit",
    "main",
    "measure",
]

SMOLLM2 = "smollm2-135m-instruct"
DEFAULT_PIPELINES = ("query", "chat", "langchain")
PIPELINES = DEFAULT_PIPELINES
"""The pipelines :func:`measure` runs: LlamaIndex query engine, chat engine, LangChain chain."""

LANGCHAIN_PROMPT = (
    "Answer the question using only the context below.\n\nContext:\n{context}\n\nQuestion: {question}"
)
"""The LangChain chain's user message (one of LangChain's RAG tutorial prompts, shortened)."""


@dataclass(frozen=True)
class Fact:
    """One document and the question it answers.

    Attributes:
        text: the document (one invented fact).
        question: a question only this document answers.
        answer: the word or number a right answer contains (matched case-insensitively).
    """

    text: str
    question: str
    answer: str


FACTS: tuple[Fact, ...] = (
    Fact("The lighthouse of Varnholm was painted green in 1911.", "What color was the lighthouse of Varnholm painted?", "green"),
    Fact("The mayor of Quillby keeps a pet tortoise named Brackenbury.", "What is the name of the pet tortoise of the mayor of Quillby?", "Brackenbury"),
    Fact("The Ostrel Bridge is exactly 417 meters long.", "How long is the Ostrel Bridge in meters?", "417"),
    Fact("Dorvik Bakery sells a blue cheese pretzel called the Moonknot.", "What is the name of the pretzel sold by Dorvik Bakery?", "Moonknot"),
    Fact("The village of Pellacombe holds its lantern festival every October.", "In which month does Pellacombe hold its lantern festival?", "October"),
    Fact("The Zantor river freezes over only in the coldest winters, and its source is Lake Imbery.", "What is the source of the Zantor river?", "Imbery"),
    Fact("Captain Yelena Brask sailed the ship Seawhistle across the Horn Sea.", "What was the name of the ship that Captain Yelena Brask sailed?", "Seawhistle"),
    Fact("The Grunwald Observatory discovered the comet Tavish-9 in 1987.", "Which comet did the Grunwald Observatory discover?", "Tavish"),
    Fact("Kestrel Valley wine is aged in barrels made of cherry wood.", "What wood are the barrels for Kestrel Valley wine made of?", "cherry"),
    Fact("The chess club of Harrowgate has 63 members.", "How many members does the chess club of Harrowgate have?", "63"),
    Fact("The national bird of the island of Mirelle is the silver heron.", "What is the national bird of the island of Mirelle?", "heron"),
    Fact("Professor Alma Quint invented the folding umbrella clock.", "What did Professor Alma Quint invent?", "umbrella clock"),
    Fact("The train from Lorring to Aldmoor leaves every day at 7:45.", "At what time does the train from Lorring to Aldmoor leave?", "7:45"),
    Fact("The Ferrow Museum's most famous painting shows a red fox asleep in snow.", "What animal is shown in the Ferrow Museum's most famous painting?", "fox"),
    Fact("The town of Brindlemoor was founded by a weaver named Ottilie Marsh.", "Who founded the town of Brindlemoor?", "Ottilie"),
    Fact("Spruce Hollow School's mascot is a purple badger.", "What is the mascot of Spruce Hollow School?", "badger"),
    Fact("The Calder Tower clock has been stopped at twelve minutes past three since 1962.", "Since which year has the Calder Tower clock been stopped?", "1962"),
    Fact("In Tamsworth, the annual pie contest was won by a pear and ginger pie.", "What pie won the annual pie contest in Tamsworth?", "pear"),
    Fact("The glacier above Skarnvik is called the Whitefang glacier.", "What is the glacier above Skarnvik called?", "Whitefang"),
    Fact("The Emberline tram is powered by a hydrogen engine.", "What powers the Emberline tram?", "hydrogen"),
    Fact("The poet Renzo Vallis wrote a book of sonnets titled Salt and Cinder.", "What is the title of the book of sonnets by Renzo Vallis?", "Salt and Cinder"),
    Fact("The orchard at Fenwick Farm grows a plum variety called Duskgold.", "What plum variety grows in the orchard at Fenwick Farm?", "Duskgold"),
)
"""The documents and their questions (invented, so the model cannot answer from memory)."""


def is_hit(answer: str, fact: Fact) -> bool:
    """True when ``answer`` contains the fact's expected word (case-insensitive)."""
    return fact.answer.lower() in answer.lower()


def hashing_vector(text: str) -> list[float]:
    """Bag-of-words vector of ``text``: 1,024 hashed word counts, L2-normalised (no model, no download)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    vectorizer = HashingVectorizer(n_features=1024, alternate_sign=False, norm="l2")
    return vectorizer.transform([text]).toarray()[0].tolist()


def build_index(facts: Sequence[Fact] = FACTS) -> Any:
    """A LlamaIndex ``VectorStoreIndex`` over one ``Document`` per fact, embedded by :func:`hashing_vector`."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding

    class HashingEmbedding(BaseEmbedding):
        """:func:`hashing_vector` as a LlamaIndex embedding model."""

        def _get_query_embedding(self, query: str) -> list[float]:
            return hashing_vector(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return hashing_vector(text)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return hashing_vector(query)

    documents = [Document(text=fact.text) for fact in facts]
    return VectorStoreIndex.from_documents(documents, embed_model=HashingEmbedding(model_name="hashing"))


def build_query_engine(index: Any, llm: Any) -> Any:
    """``index.as_query_engine(llm=llm)`` with LlamaIndex's defaults (top 2, compact mode, chat text-QA template)."""
    return index.as_query_engine(llm=llm)


def build_chat_engine(index: Any, llm: Any) -> Any:
    """``index.as_chat_engine(llm=llm)`` with LlamaIndex's defaults (condense plus context, top 2)."""
    return index.as_chat_engine(llm=llm)


def build_retriever(facts: Sequence[Fact] = FACTS, k: int = 2) -> Any:
    """A LangChain retriever: an ``InMemoryVectorStore`` of the facts embedded by :func:`hashing_vector`."""
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    class HashingEmbeddings(Embeddings):
        """:func:`hashing_vector` as LangChain embeddings."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hashing_vector(text) for text in texts]

        def embed_query(self, text: str) -> list[float]:
            return hashing_vector(text)

    store = InMemoryVectorStore.from_texts([fact.text for fact in facts], HashingEmbeddings())
    return store.as_retriever(search_kwargs={"k": k})


def build_chain(retriever: Any, chat_model: Any) -> Any:
    """``{"context": retriever | join, "question": passthrough} | prompt | chat_model | StrOutputParser()``."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    def join(documents: Sequence[Any]) -> str:
        return "\n\n".join(document.page_content for document in documents)

    prompt = ChatPromptTemplate.from_messages([("human", LANGCHAIN_PROMPT)])
    context = retriever | RunnableLambda(join)
    return {"context": context, "question": RunnablePassthrough()} | prompt | chat_model | StrOutputParser()


def _answerers(pipeline: str, index: Any, retriever: Any, llm: Any, chat_model: Any) -> Callable[[str], tuple[str, list[str]]]:
    """A function question -> (answer text, retrieved document texts) for ``pipeline``."""
    if pipeline == "query":

        def query(question: str) -> tuple[str, list[str]]:
            response = build_query_engine(index, llm).query(question)
            return str(response.response or ""), [n.node.get_content() for n in response.source_nodes]

        return query
    if pipeline == "chat":

        def chat(question: str) -> tuple[str, list[str]]:
            response = build_chat_engine(index, llm).chat(question)  # a new engine: no history
            return str(response.response or ""), [n.node.get_content() for n in response.source_nodes]

        return chat
    if pipeline == "langchain":
        chain = build_chain(retriever, chat_model)

        def lc(question: str) -> tuple[str, list[str]]:
            return chain.invoke(question), [document.page_content for document in retriever.invoke(question)]

        return lc
    msg = f"pipeline must be one of {', '.join(DEFAULT_PIPELINES)}, got {pipeline!r}"
    raise ValueError(msg)


def measure(
    engine: Any, pipeline: str, method: str, facts: Sequence[Fact], decoder_settings: dict[str, Any]
) -> dict[str, Any]:
    """Answer every fact's question through ``pipeline`` with ``method`` on ``engine``'s model.

    Args:
        engine: the :class:`~mfs_core.MFSEngine` (its model answers every pipeline).
        pipeline: ``"query"``, ``"chat"`` or ``"langchain"``.
        method: a registered decoder (``"mfs"``, ``"cot"``, ...).
        facts: the documents and questions (all are indexed; all are asked).
        decoder_settings: MFS settings of the LLMs (``step_beam_size``, ``seed``, ...).

    Returns:
        ``{"pipeline", "method", "questions", "hits", "retrieved", "empty", "seconds",
        "output_tokens", "answers": [{"question", "expected", "answer", "hit", "retrieved"}]}``;
        ``output_tokens`` sums every generation request of the decodes (tokens).
    """
    from langchain_mfs import ChatMFS
    from llamaindex_mfs import MFSLLM
    from mfs_core.call import adapter_arguments

    llm = MFSLLM(engine=engine, method=method, **adapter_arguments(decoder_settings))
    chat_model = ChatMFS(engine=engine, method=method, **adapter_arguments(decoder_settings))
    answer = _answerers(pipeline, build_index(facts), build_retriever(facts), llm, chat_model)
    tokens = 0
    generate = engine.backend.generate

    def counting(requests: Any) -> Any:
        nonlocal tokens
        outputs = generate(requests)
        tokens += sum(c.num_tokens for row in outputs for c in row)
        return outputs

    engine.backend.generate = counting
    rows, start = [], time.perf_counter()
    try:
        for fact in facts:
            text, retrieved = answer(fact.question)
            rows.append({"question": fact.question, "expected": fact.answer, "answer": text,
                         "hit": is_hit(text, fact), "retrieved": fact.text in retrieved})
    finally:
        del engine.backend.generate  # the instance attribute; the class method shows again
    return {
        "pipeline": pipeline, "method": method, "questions": len(rows), "hits": sum(r["hit"] for r in rows),
        "retrieved": sum(r["retrieved"] for r in rows), "empty": sum(not r["answer"].strip() for r in rows),
        "seconds": time.perf_counter() - start, "output_tokens": tokens, "answers": rows,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, run every (pipeline, method), print the table and write the JSON."""
    from rich.console import Console
    from rich.table import Table

    from mfs_core import MFSEngine, MFSSettings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=SMOLLM2)
    parser.add_argument("--backend", default="transformers", help="transformers | vllm (vLLM's CPU build)")
    parser.add_argument("--pipelines", default=",".join(DEFAULT_PIPELINES))
    parser.add_argument("--methods", default="cot,mfs", help="registered decoders, comma-separated")
    parser.add_argument("--questions", type=int, default=len(FACTS), help=f"first N questions (at most {len(FACTS)})")
    parser.add_argument("--step-beam-size", type=int, default=2)
    parser.add_argument("--num-rollouts", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--max-step-tokens", type=int, default=32)
    parser.add_argument("--max-answer-tokens", type=int, default=48)
    parser.add_argument("--assistant-prefix", default="", help="text opening the answer (the engine's default: "
                        "'The reasoning steps are:\\n\\n')")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-results/smollm2-rag.json"))
    args = parser.parse_args(argv)

    facts = FACTS[: args.questions]
    decoder_settings = {
        "step_beam_size": args.step_beam_size, "num_rollouts": args.num_rollouts, "max_steps": args.max_steps,
        "max_step_tokens": args.max_step_tokens, "max_answer_tokens": args.max_answer_tokens,
        "assistant_prefix": args.assistant_prefix, "seed": args.seed,
    }
    console = Console()
    engine = MFSEngine.from_settings(MFSSettings(model=args.model, backend=args.backend, device="cpu"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for method in args.methods.split(","):
        for pipeline in args.pipelines.split(","):
            run = measure(engine, pipeline, method, facts, decoder_settings)
            console.print(f"{pipeline} / {method}: {run['hits']}/{run['questions']} hits in {run['seconds']:.0f} s")
            runs.append(run)
            # written after every run, so an interrupted benchmark keeps what it measured
            args.out.write_text(json.dumps({"model": args.model, "settings": decoder_settings, "runs": runs}, indent=2))

    table = Table(title=f"RAG on {args.model}: answers containing the right document's fact")
    for column in ("pipeline", "method", "hits", "retrieved", "empty answers", "output tokens / q", "s / q"):
        table.add_column(column, justify="left" if column in ("pipeline", "method") else "right")
    for run in runs:
        n = run["questions"]
        table.add_row(run["pipeline"], run["method"], f"{run['hits']}/{n}", f"{run['retrieved']}/{n}", str(run["empty"]),
                      f"{run['output_tokens'] / n:.0f}", f"{run['seconds'] / n:.1f}")
    console.print(table)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
