"""Images to run the models on without a data set: seeded synthetic ones (`synthetic_images`: tests,
calibration, benchmarks) and real photos for correctness runs (`sample_photos`), from the ones
scikit-image (and scikit-learn, if installed) ship.

No network: the photos are arrays inside the installed packages. They are centre-cropped to a square,
resized with bilinear interpolation and normalised with the ImageNet mean/std that DeiT uses.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SKIMAGE_PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "camera")


def synthetic_images(n: int, size: int, seed: int = 0) -> torch.Tensor:
    """Seeded, smooth, photo-like test images (low-frequency colour fields plus texture), normalised.

    Args:
        n: number of images.
        size: side in pixels.
        seed: generator seed.

    Returns:
        float32 [n, 3, size, size], roughly zero-mean unit-variance per channel.
    """
    g = torch.Generator().manual_seed(seed)
    low = torch.randn(n, 3, 7, 7, generator=g)
    img = F.interpolate(low, size=(size, size), mode="bicubic", align_corners=False)
    img = img + 0.3 * torch.randn(n, 3, size, size, generator=g)
    return (img - img.mean(dim=(2, 3), keepdim=True)) / img.std(dim=(2, 3), keepdim=True)


def _to_tensor(arr, size: int) -> torch.Tensor:
    t = torch.as_tensor(arr).float()
    if t.dim() == 2:  # grayscale
        t = t[..., None].expand(-1, -1, 3)
    t = t[..., :3].permute(2, 0, 1) / 255.0
    h, w = t.shape[1:]
    s = min(h, w)
    t = t[:, (h - s) // 2 : (h - s) // 2 + s, (w - s) // 2 : (w - s) // 2 + s]
    t = F.interpolate(t[None], size=(size, size), mode="bilinear", align_corners=False, antialias=True)[0]
    mean = torch.tensor(IMAGENET_MEAN)[:, None, None]
    std = torch.tensor(IMAGENET_STD)[:, None, None]
    return (t - mean) / std


def sample_photos(size: int, names: tuple[str, ...] = SKIMAGE_PHOTOS, *, include_sklearn: bool = True) -> torch.Tensor:
    """Load bundled photos as a normalised batch.

    Args:
        size: output side in pixels (224 or 384 for DeiT).
        names: scikit-image `skimage.data` photo names.
        include_sklearn: also add scikit-learn's `load_sample_images()` photos when sklearn is installed.

    Returns:
        float32 [n, 3, size, size].
    """
    try:
        from skimage import data
    except ImportError as e:
        raise RuntimeError("sample_photos needs scikit-image (pip install scikit-image)") from e
    if not isinstance(size, int) or size < 16:
        raise ValueError(f"size must be an int >= 16, got {size!r}")
    imgs = []
    for name in names:
        if not hasattr(data, name):
            raise ValueError(f"skimage.data has no photo {name!r}")
        imgs.append(_to_tensor(getattr(data, name)(), size))
    if include_sklearn:
        try:
            from sklearn.datasets import load_sample_images
        except ImportError:
            pass
        else:
            imgs.extend(_to_tensor(a, size) for a in load_sample_images().images)
    return torch.stack(imgs)
