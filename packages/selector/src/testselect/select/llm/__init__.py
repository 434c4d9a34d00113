"""The optional LLM-backed reasoner: an OpenAI-compatible endpoint proposes, the evidence disposes."""
