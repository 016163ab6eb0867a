"""LlamaIndex's default RAG engines answered by the demo model.

``VectorStoreIndex(...).as_query_engine()`` and ``.as_chat_engine()`` with their defaults
(compact response mode with the chat text-QA and refine templates; the condense-plus-context
chat engine, which ``ChatMode.BEST`` builds in llama-index-core 0.14) over ``MFSLLM``: the
context window must leave room for the retrieved chunks (the first demo model's 512 tokens
gave ``Chunk size -357 is not positive``) and the model must find the facts in the
retrieved context. The embedding is a hashing bag of words (scikit-learn's
``HashingVectorizer``), so nothing is downloaded; the documents are the question's facts and
a distractor story about another person and object.
"""

from __future__ import annotations

import pytest

from mfs_core.answers import extract_answer

pytestmark = pytest.mark.slow

SETTINGS = {"device": "cpu", "step_beam_size": 2, "num_rollouts": 2, "max_steps": 4, "seed": 0}
FACTS = "Grace has 7 bags with 9 cards in each bag. Sadly, 6 cards break."
DISTRACTOR = "Omar has 40 marbles. Omar gives 5 marbles to a neighbor. Then Omar finds 12 more marbles."
QUESTION = "How many cards are there now?"
ANSWER = "57"  # 7 * 9 - 6


def _index():
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from sklearn.feature_extraction.text import HashingVectorizer

    class HashingEmbedding(BaseEmbedding):
        """Bag-of-words vectors (1,024 hashed word counts, L2-normalised): offline retrieval."""

        def _vector(self, text: str) -> list[float]:
            vectorizer = HashingVectorizer(n_features=1024, alternate_sign=False, norm="l2")
            return vectorizer.transform([text]).toarray()[0].tolist()

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

    documents = [Document(text=FACTS), Document(text=DISTRACTOR)]
    return VectorStoreIndex.from_documents(documents, embed_model=HashingEmbedding(model_name="hashing"))


def test_the_default_engines_run_and_put_the_retrieved_facts_in_the_prompt() -> None:
    """The mechanics of RAG: the 2,048-token window leaves room for the chunks (the first
    demo model's 512 raised ``Chunk size -357 is not positive``), the facts are retrieved first
    and reach the model's messages, and an answer comes back."""
    from llama_index.core.chat_engine import CondensePlusContextChatEngine
    from llama_index.core.instrumentation.events.llm import LLMChatStartEvent

    from llamaindex_mfs import MFSLLM
    from tests.llamaindex_events import recording

    llm = MFSLLM(**SETTINGS)
    assert llm.metadata.context_window >= 2048
    index = _index()
    with recording() as handler:
        query = index.as_query_engine(llm=llm).query(QUESTION)
        chat_engine = index.as_chat_engine(llm=llm)
        assert isinstance(chat_engine, CondensePlusContextChatEngine)
        chat = chat_engine.chat(QUESTION)
    for response in (query, chat):
        assert FACTS in response.source_nodes[0].node.get_content()
        assert extract_answer(response.response) is not None
    prompts = ["\n".join(str(m.content) for m in event.messages) for event in handler.of_type(LLMChatStartEvent)]
    assert len(prompts) == 2 and all(FACTS in prompt and QUESTION in prompt for prompt in prompts)
    assert "Context information is below." in prompts[0]  # LlamaIndex's chat text-QA template
    assert "Here are the relevant documents for the context:" in prompts[1]  # the context chat prompt


# Measured on the v2 demo model (v3, shipped now: 0/60, python -m experiments.testbed.evaluate_formats): it answers RAG prompts from the wrong sentences
# (0/40 right on training-distribution RAG prompts; here 42 and 79 instead of 57).
@pytest.mark.xfail(strict=True, reason="the demo model (v2 and v3) does not read word problems out of RAG prompts "
                   "(mfs_core/demo/MODEL_CARD.md, 'What it can and cannot do')")
@pytest.mark.parametrize("engine", ["query", "chat"])
def test_the_default_engines_answer_from_the_retrieved_facts(engine: str) -> None:
    from llamaindex_mfs import MFSLLM

    index = _index()
    llm = MFSLLM(**SETTINGS)
    response = index.as_query_engine(llm=llm).query(QUESTION) if engine == "query" else index.as_chat_engine(llm=llm).chat(QUESTION)
    print(response.response)
    assert extract_answer(response.response) == ANSWER
