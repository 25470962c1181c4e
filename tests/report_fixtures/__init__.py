"""Builders of realistic run directories for the stats, gate and report tests."""
