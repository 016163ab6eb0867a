"""LlamaIndex's default RAG engines answered by the demo model (issue 10, item 2).

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
from tests.tool_model import requires_tool_model

# The checkpoint that renders tools is the one trained on RAG prompts (the v2 demo model).
pytestmark = [requires_tool_model, pytest.mark.slow]

SETTINGS = {"device": "cpu", "step_beam_size": 2, "num_rollouts": 2, "max_steps": 4, "seed": 0}
FACTS = "Grace gets 7 cards every day for 9 days. Sadly, 6 cards break."
DISTRACTOR = "Omar has 40 marbles. Omar gives 5 marbles to a neighbor. Then Omar finds 12 more marbles."
QUESTION = "How many cards are there now?"
ANSWER = "57"  # 9 * 7 - 6


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


def test_the_default_query_engine_answers_from_the_retrieved_facts() -> None:
    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(**SETTINGS)
    assert llm.metadata.context_window >= 2048
    response = _index().as_query_engine(llm=llm).query(QUESTION)
    print(response.response)
    assert FACTS in response.source_nodes[0].node.get_content()
    assert extract_answer(response.response) == ANSWER


def test_the_default_chat_engine_answers_from_the_retrieved_facts() -> None:
    from llama_index.core.chat_engine import CondensePlusContextChatEngine

    from llamaindex_mfs import MFSLLM

    engine = _index().as_chat_engine(llm=MFSLLM(**SETTINGS))
    assert isinstance(engine, CondensePlusContextChatEngine)
    response = engine.chat(QUESTION)
    print(response.response)
    assert FACTS in response.source_nodes[0].node.get_content()
    assert extract_answer(response.response) == ANSWER
