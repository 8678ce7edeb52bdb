// overlay.hpp - colour a map already at photo pixels (maps/upsample) and blend it over the photo.
#pragma once
#include <string>
#include <vector>

#include "io/image_io.hpp"
#include "maps/upsample.hpp"
#include "model/preprocess.hpp"

namespace attnmap {

/// Min-max normalises a map to [0,1] for display. A constant map (max - min <= 1e-12 * max|v|) cannot be
/// normalised: it becomes all zeros and `*flat` is set (the caller says so). No NaN is ever produced.
std::vector<float> normalize_minmax(const std::vector<float>& map, bool* flat);

/// out = (1 - alpha) * photo + alpha * colour(map) inside `box` (original pixel units, rounded to whole
/// pixels); the photo is unchanged outside it. `map01` holds values in [0,1] at the box's pixel size,
/// as produced by overlay_box_size. Throws attnmap::Error when alpha is outside [0,1].
Image blend_overlay(const Image& photo, const std::vector<float>& map01, int map_w, int map_h, int x0, int y0,
                    const uint8_t* colormap, float alpha);

/// The DINO-style mask view (--threshold): pixels where `mask01` (values in [0,1] at the box's pixel size,
/// the patch mask upsampled) is >= 0.5 are inside. Inside: out = (1 - alpha) * photo + alpha * rgb (a
/// semi-transparent fill); an outline `outline` pixels wide, drawn opaque in `rgb`, on the inside pixels
/// within that distance (Chebyshev) of an outside pixel or of the box edge - the mask's contour. Outside:
/// the photo unchanged. Throws attnmap::Error when the box does not fit or alpha is outside [0,1].
Image draw_mask_overlay(const Image& photo, const std::vector<float>& mask01, int map_w, int map_h, int x0, int y0,
                        const uint8_t rgb[3], float alpha, int outline);

/// Resizes an RGB photo to w x h (stb_image_resize, its default filter, sRGB-aware), e.g. for thumbnails.
/// Throws attnmap::Error on an empty size.
Image resize_photo(const Image& photo, int w, int h);

}  // namespace attnmap
