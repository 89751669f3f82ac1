/** Let in-process work settle: promise chains, `setImmediate` batches and watch deliveries. */
export async function settle(turns = 12): Promise<void> {
  for (let i = 0; i < turns; i += 1) {
    await new Promise<void>((resolve) => {
      setImmediate(resolve);
    });
  }
}
