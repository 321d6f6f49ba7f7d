"""Reads of the live scheduler (budget tree as the engine sees it, windowed usage, history)."""
