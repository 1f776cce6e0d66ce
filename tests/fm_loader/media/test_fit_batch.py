"""The GPU path's batched crop-and-resize (:func:`fit_batch_on_device`), run on the CPU: close to the CPU path's
PIL resize, a pixel depends on its own image only (not on the batch, its padding or the chunking), and the
batch's padding gets no weight."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from fm_loader.media import gpu_decode
from fm_loader.media.decode import center_box
from fm_loader.media.gpu_decode import fit_batch_on_device, subsamples

# enlarged, shrunk by 1.3x to 12x (past MAX_SUBSAMPLES), portrait, landscape, a thin strip
SIZES = [(100, 80), (240, 320), (480, 640), (960, 1280), (1500, 900), (3000, 2000), (57, 301)]


def photo(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Gradients, a texture and noise: ``(h, w, 3)`` uint8."""
    y, x = np.mgrid[0:height, 0:width]
    texture = 128 + 100 * np.sin(x / 17.0) * np.cos(y / 23.0)
    pixels = np.stack([x * 255 / width, y * 255 / height, texture], axis=-1)
    return (pixels + rng.normal(0, 6, pixels.shape)).clip(0, 255).astype(np.uint8)


def chw(pixels: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()


def pil_fit(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """The CPU path's crop and resize of decoded pixels (PIL bilinear with a box)."""
    box = center_box(pixels.shape[1], pixels.shape[0], height, width)
    image = Image.fromarray(pixels).resize((width, height), Image.Resampling.BILINEAR, box=box)
    return np.asarray(image)


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [photo(rng, h, w) for h, w in SIZES]


@pytest.mark.parametrize("shape", [(256, 256), (192, 336), (320, 160)])
def test_close_to_the_cpu_paths_resize(images, shape) -> None:
    out = fit_batch_on_device([chw(a) for a in images], *shape)
    assert out.shape == (len(images), 3, *shape) and out.dtype == torch.uint8
    for pixels, fitted in zip(images, out, strict=True):
        diff = np.abs(fitted.permute(1, 2, 0).numpy().astype(float) - pil_fit(pixels, *shape))
        assert diff.mean() < 1.0, (pixels.shape, diff.mean())
        assert diff.max() <= 10, (pixels.shape, diff.max())


def test_a_pixel_depends_on_its_own_image_only(images, monkeypatch) -> None:
    batch = [chw(a) for a in images]
    together = fit_batch_on_device(batch, 256, 256)
    monkeypatch.setattr(gpu_decode, "CHUNK_ELEMENTS", 1)  # every image its own sampling call
    for n, image in enumerate(batch):
        alone = fit_batch_on_device([image], 256, 256)[0]
        diff = (alone.int() - together[n].int()).abs()
        assert diff.max() <= 1 and diff.float().mean() < 0.01, SIZES[n]
    chunked = fit_batch_on_device(batch, 256, 256)
    assert (chunked.int() - together.int()).abs().max() <= 1


def test_the_batchs_padding_gets_no_weight() -> None:
    """Small images batched beside a big one sit in zero padding: an enlarged flat image stays exactly flat up
    to its edges (a sample outside the image, or a neighbour past its edge with any weight, would pull the
    edge pixels towards 0), and a distinct last column repeats at the output's edge."""
    small = torch.full((3, 13, 9), 200, dtype=torch.uint8)  # taller than wide: every column is kept
    small[:, :, -1] = 40
    flat = torch.full((3, 7, 5), 200, dtype=torch.uint8)
    big = torch.zeros((3, 600, 500), dtype=torch.uint8)
    for shape in [(64, 64), (48, 96)]:
        out = fit_batch_on_device([small, big, flat], *shape)
        assert int(out[2].min()) == int(out[2].max()) == 200
        assert int(out[0].min()) >= 40 and int(out[0].max()) == 200
        assert int(out[0, :, :, -1].max()) <= 60  # the edge column itself
        assert int(out[1].max()) == 0


def test_subsamples_follow_the_downscale() -> None:
    assert subsamples(100, 80, 256, 256) == 1  # enlarged
    assert subsamples(512, 512, 256, 256) == 2
    assert subsamples(960, 1280, 256, 256) == 4  # the crop is 960x960: 3.75x
    assert subsamples(6000, 6000, 256, 256) == gpu_decode.MAX_SUBSAMPLES


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (this torch build has none)")
def test_the_fit_never_waits_for_the_gpu(images) -> None:
    """The decode thread queues the fit and moves on: no host-device synchronization inside it (a plain
    ``torch.tensor(..., device="cuda")`` would be one), checked with torch's sync debug mode."""
    on_gpu = [chw(a).cuda() for a in images]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = fit_batch_on_device(on_gpu, 256, 256)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    cpu = fit_batch_on_device([chw(a) for a in images], 256, 256)
    assert (out.cpu().int() - cpu.int()).abs().max() <= 1
