"""Instructor tooling for the tinyprof course: release student notebooks, grade submissions."""
