ALTER TABLE `allocations` ADD `array_size` integer;
