/* elementwise.cl — simple per-element operations. One work-item per element; the launcher
 * rounds the global size up, so every kernel checks its index against n. */

__kernel void elementwise_scale(__global const float *x, __global float *y, float alpha, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i < n)
        y[i] = alpha * x[i];
}

__kernel void elementwise_add(__global const float *a, __global const float *b, __global float *y,
                              uint n)
{
    uint i = (uint)get_global_id(0);
    if (i < n)
        y[i] = a[i] + b[i];
}
