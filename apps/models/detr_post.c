/* detr_post.c — what follows a DETR forward pass (see detr.h): Hugging Face's
 * post_process_object_detection, boxes clipped to the image for showing, and the COCO names of
 * the checkpoints' class ids. */
#include "detr.h"

#include <math.h>

int detr_postprocess(const float *logits, const float *boxes, int64_t queries, int64_t classes,
                     float threshold, int img_w, int img_h, detr_detection *out)
{
    int n = 0;
    for (int64_t q = 0; q < queries; q++) {
        const float *l = logits + q * classes;
        float mx = l[0];
        for (int64_t c = 1; c < classes; c++)
            mx = l[c] > mx ? l[c] : mx;
        float sum = 0.0f;
        for (int64_t c = 0; c < classes; c++)
            sum += expf(l[c] - mx);
        int best = 0;
        for (int64_t c = 1; c < classes - 1; c++)
            if (l[c] > l[best])
                best = (int)c;
        float score = expf(l[best] - mx) / sum;
        if (!(score > threshold))
            continue;
        const float *b = boxes + q * 4;
        detr_detection *d = &out[n++];
        d->query = (int)q;
        d->label = best;
        d->score = score;
        d->box[0] = (b[0] - 0.5f * b[2]) * (float)img_w;
        d->box[1] = (b[1] - 0.5f * b[3]) * (float)img_h;
        d->box[2] = (b[0] + 0.5f * b[2]) * (float)img_w;
        d->box[3] = (b[1] + 0.5f * b[3]) * (float)img_h;
    }
    return n;
}

static const char *const coco[91] = {
    "N/A",          "person",         "bicycle",
    "car",          "motorcycle",     "airplane",
    "bus",          "train",          "truck",
    "boat",         "traffic light",  "fire hydrant",
    "N/A",          "stop sign",      "parking meter",
    "bench",        "bird",           "cat",
    "dog",          "horse",          "sheep",
    "cow",          "elephant",       "bear",
    "zebra",        "giraffe",        "N/A",
    "backpack",     "umbrella",       "N/A",
    "N/A",          "handbag",        "tie",
    "suitcase",     "frisbee",        "skis",
    "snowboard",    "sports ball",    "kite",
    "baseball bat", "baseball glove", "skateboard",
    "surfboard",    "tennis racket",  "bottle",
    "N/A",          "wine glass",     "cup",
    "fork",         "knife",          "spoon",
    "bowl",         "banana",         "apple",
    "sandwich",     "orange",         "broccoli",
    "carrot",       "hot dog",        "pizza",
    "donut",        "cake",           "chair",
    "couch",        "potted plant",   "bed",
    "N/A",          "dining table",   "N/A",
    "N/A",          "toilet",         "N/A",
    "tv",           "laptop",         "mouse",
    "remote",       "keyboard",       "cell phone",
    "microwave",    "oven",           "toaster",
    "sink",         "refrigerator",   "N/A",
    "book",         "clock",          "vase",
    "scissors",     "teddy bear",     "hair drier",
    "toothbrush",
};

const char *detr_coco_label(int id)
{
    return id >= 0 && id < 91 ? coco[id] : NULL;
}

void detr_clip_box(const float box[4], int img_w, int img_h, float out[4])
{
    const float lim[4] = {(float)img_w, (float)img_h, (float)img_w, (float)img_h};
    for (int k = 0; k < 4; k++)
        out[k] = box[k] > lim[k] ? lim[k] : box[k] > 0.0f ? box[k] : 0.0f;
}
