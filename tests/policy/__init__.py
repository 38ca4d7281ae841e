"""Tests of gaca.policy."""
