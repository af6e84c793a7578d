"""The template device: host copies in and out of its own buffers."""

from __future__ import annotations

import numpy as np
from singa.backend import Device

from .buffer import Allocator, View


class TemplateDevice(Device):
    """Device ``template:<index>``; kernels run synchronously, so there is nothing to wait for."""

    lang = "template"

    def __init__(self, index: int):
        super().__init__("template", index, Allocator())

    def make_native(self, ct, buf) -> View:
        # buf is the CTensor's Buffer from Allocator; shp, strd and off are in elements. Core's
        # Device.native keeps the view on the tensor until its block holds another buffer.
        return View(buf, ct.dtype_code, ct.dims, ct.strides, ct.offset)

    def native_to_numpy(self, arr: View) -> np.ndarray:
        return np.array(arr.host_array())  # device -> host copy

    def numpy_into_native(self, src, arr: View) -> None:
        np.copyto(arr.host_array(), src, casting="unsafe")  # host -> device copy

    def synchronize(self) -> None:
        pass
