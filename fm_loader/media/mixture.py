"""Deprecated location: :class:`fm_loader.modality_mixture.ModalityMixture` (it mixes loaders of any kind)."""

from fm_loader.modality_mixture import ModalityMixture, ResumableLoader

__all__ = ["ModalityMixture", "ResumableLoader"]
